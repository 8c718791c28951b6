// Random reads, and random 64-bit atomics (as the allocator's on headers and bitmaps), over 1.5 GiB
// and over its first 16 MiB: cudaMalloc memory against memory mapped with the driver's virtual
// memory management in pieces of 2 MiB .. 1.5 GiB (docs/decisions/027: does a growing heap's mapped
// memory cost its kernels time?). Build and run on a GPU machine:
// nvcc -arch=sm_90 -O2 -o vmm-gather-probe tools/gpu/vmm-gather-probe.cu -lcuda && ./vmm-gather-probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { printf("%s failed %d\n", #x, (int)r); return 1; } } while (0)
__global__ void gather(unsigned long long* data, size_t words, unsigned long long* out, int reads, bool atomic) {
  unsigned long long x = blockIdx.x * 1024ull + threadIdx.x + 1, sum = 0;
  for (int i = 0; i < reads; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    sum += atomic ? atomicOr(&data[x % words], 1ull << (x & 63)) : data[x % words];
  }
  if (sum == 42) *out = sum;
}
__global__ void fill(unsigned long long* d, size_t n) { for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = i; }
static float time_one(unsigned long long* d, size_t words, unsigned long long* out, bool atomic) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  gather<<<4096, 256>>>(d, words, out, 64, atomic);
  float best = 1e9;
  for (int r = 0; r < 5; ++r) { cudaEventRecord(a); gather<<<4096, 256>>>(d, words, out, 64, atomic); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms; }
  return best;
}
// Milliseconds of: reads over all, reads over the first 16 MiB, atomics over all, atomics over 16 MiB.
static void report(const char* kind, size_t piece_mib, unsigned long long* d, size_t words, unsigned long long* out) {
  const size_t hot = (size_t(16) << 20) / 8;
  printf("{\"kind\":\"%s\",\"piece_mib\":%zu,\"read_ms\":%.3f,\"read_16mib_ms\":%.3f,\"atomic_ms\":%.3f,\"atomic_16mib_ms\":%.3f}\n",
         kind, piece_mib, time_one(d, words, out, false), time_one(d, hot, out, false), time_one(d, words, out, true), time_one(d, hot, out, true));
}
int main() {
  cudaFree(0);
  const size_t bytes = size_t(1536) << 20, words = bytes / 8;
  unsigned long long* out; cudaMalloc(&out, 8);
  unsigned long long* d; cudaMalloc(&d, bytes); fill<<<1024, 256>>>(d, words);
  report("cudaMalloc", bytes >> 20, d, words, out); cudaFree(d);
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;
  size_t gran = 0; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUmemAccessDesc acc{}; acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc.location.id = dev; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (size_t piece : {gran, size_t(32) << 20, size_t(128) << 20, size_t(512) << 20, bytes}) {
    CUdeviceptr base; CK(cuMemAddressReserve(&base, bytes, size_t(512) << 20, 0, 0));
    CUmemGenericAllocationHandle hs[1024]; int n = 0;
    for (size_t off = 0; off < bytes; off += piece) { CK(cuMemCreate(&hs[n], piece, &prop, 0)); CK(cuMemMap(base + off, piece, 0, hs[n], 0)); ++n; }
    CK(cuMemSetAccess(base, bytes, &acc, 1));
    fill<<<1024, 256>>>((unsigned long long*)base, words);
    report("vmm", piece >> 20, (unsigned long long*)base, words, out);
    cuMemUnmap(base, bytes); for (int i = 0; i < n; ++i) cuMemRelease(hs[i]); cuMemAddressFree(base, bytes);
  }
}
