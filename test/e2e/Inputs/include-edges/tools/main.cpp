// tools/ may include anything.
#include "compiler/Compiler.h"
#include "runtime/Mesh.h"
