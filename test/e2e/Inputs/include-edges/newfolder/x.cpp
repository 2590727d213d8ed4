// Not a layer.
#include "common/Ok.h"
