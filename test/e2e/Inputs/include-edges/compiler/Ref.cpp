// Only kernels/reference of the kernels.
#include "kernels/reference/Reference.h"
#include "kernels/cpu/Blas.h"
