#pragma once
/// @file soaheap.cuh
/// @brief The umbrella header: everything an application needs, from every layer (see
///        docs/architecture.md): base, reflection, core, defrag (defragment, policies and their
///        configuration structs) and the profiler. It is a module of its own (umbrella/), above
///        every other module but compat, which builds on it.

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
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/defrag/policy.hpp>
#include <soaheap/defrag/trim.cuh>
#include <soaheap/profiler/profiler.hpp>
