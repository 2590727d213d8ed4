// A relative path into another layer.
#include "../runtime/Mesh.h"
// #include "runtime/Commented.h" is not an include.
