#pragma once
// DynaSOAr's header name, for programs that `#include "dynasoar.h"`: put this folder first on the
// include path (CMake: target_link_libraries(app PRIVATE soaheap::dynasoar_shim)) and they build
// against soaheap's DynaSOAr compatibility layer unchanged.
#include <soaheap/compat/dynasoar.h>
