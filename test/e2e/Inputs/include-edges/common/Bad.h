// common/ includes nothing of llmc outside itself.
#include "common/Ok.h"
#include "kernels/Kernel.h"
#include <cuda_runtime.h>
