#pragma once
/// @file soaheap.cuh
/// @brief The umbrella header: everything an application needs.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/stats.hpp>
#include <soaheap/core/untyped_memory.cuh>
#include <soaheap/core/device_list.cuh>
#include <soaheap/reflection/array.cuh>
#include <soaheap/reflection/class_traits.cuh>
#include <soaheap/reflection/field.cuh>
#include <soaheap/reflection/object.cuh>
