// Kernels that tests/ptx/check_inlined.py reads as PTX: every kernel named inlined_* must hold the
// whole path of the call it makes — no call to another function, no local memory. An out-of-line
// allocation path copies the kernel's heap view to local memory in every thread and made the
// applications 1.6-3.8x slower (docs/decisions/008-allocation-path-inlined.md); malloc's path went
// out of line unnoticed when its growth path lengthened, until it was forced inline.

#include "tests/common/test_classes.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace {

using View = soaheap_test::TestHeap::View;
using soaheap_test::Node;

__device__ std::uint64_t thread_index() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }

}  // namespace

__global__ void inlined_new(View heap, Node** out) {
  out[thread_index()] = new (heap) Node(thread_index());
}

__global__ void inlined_create_if(View heap, Node** out) {
  out[thread_index()] = soaheap::create_if<Node>(heap, thread_index() % 3 == 0, thread_index());
}

__global__ void inlined_create_if_near(View heap, Node* const* near, Node** out) {
  const std::uint64_t i = thread_index();
  out[i] = soaheap::create_if_near<Node>(heap, i % 2 == 0, near[i], i);
}

__global__ void inlined_destroy(View heap, Node* const* objects) {
  soaheap::destroy(heap, objects[thread_index()]);
}

__global__ void inlined_malloc(View heap, std::uint64_t bytes, void** out) {
  out[thread_index()] = soaheap::malloc(heap, bytes);
}

__global__ void inlined_free(View heap, void* const* memory) {
  soaheap::free(heap, memory[thread_index()]);
}
