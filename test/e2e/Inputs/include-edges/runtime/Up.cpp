// Upwards, and MLIR in the runtime.
#include "common/Ok.h"
#include "passes/Passes.h"
#include "mlir/IR/Builders.h"
