// Allowed: a standard header.
#include <cstdint>
