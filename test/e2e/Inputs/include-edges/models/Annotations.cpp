// The slip this layer table removed: annotations through passes/.
#include "passes/lib/ShardAttr.h"
