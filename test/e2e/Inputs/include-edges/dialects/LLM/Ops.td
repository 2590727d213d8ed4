// TableGen includes are edges too.
include "mlir/IR/OpBase.td"
include "passes/Passes.td"
