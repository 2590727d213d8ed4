// Sideways: a dialect into the kernels.
#include "kernels/QuantScheme.h"
