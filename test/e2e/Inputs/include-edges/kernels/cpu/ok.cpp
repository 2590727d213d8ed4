// Allowed: kernels -> common, and a header beside this file.
#include "common/Ok.h"
#include "Blas.h"
