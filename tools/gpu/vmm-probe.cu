// Does mapping memory with CUDA's virtual memory management wait for a running kernel, and what
// does mapping cost per 2 MiB chunk and per GiB? (the open question of docs/decisions/027).
// Build and run on a GPU machine: nvcc -arch=sm_90 -O2 -o vmm-probe tools/gpu/vmm-probe.cu -lcuda && ./vmm-probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <atomic>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { printf("%s failed %d\n", #x, (int)r); return 1; } } while (0)
__global__ void spin(unsigned long long ns, volatile int* flag) {
  unsigned long long start; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) { unsigned long long now; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); if (now - start > ns || *flag) break; __nanosleep(1000); }
}
static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaFree(0);
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;
  size_t gran = 0; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUdeviceptr base; const size_t reserve = size_t(16) << 30; CK(cuMemAddressReserve(&base, reserve, gran, 0, 0));
  CUmemAccessDesc acc{}; acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc.location.id = dev; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  auto map = [&](size_t off, size_t bytes) -> int { CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, bytes, &prop, 0)); CK(cuMemMap(base + off, bytes, 0, h, 0)); CK(cuMemSetAccess(base + off, bytes, &acc, 1)); return 0; };
  printf("granularity %zu\n", gran);
  // (1) cost: 1 GiB in 2 MiB chunks, and 1 GiB as one mapping
  double t0 = now_ms(); for (size_t off = 0; off < (size_t(1) << 30); off += gran) if (map(off, gran)) return 1; double t1 = now_ms();
  printf("map 1 GiB in %zu-byte chunks: %.2f ms (%.1f us per chunk)\n", gran, t1 - t0, (t1 - t0) * 1000.0 / ((size_t(1) << 30) / gran));
  t0 = now_ms(); if (map(size_t(1) << 30, size_t(1) << 30)) return 1; t1 = now_ms();
  printf("map 1 GiB as one allocation: %.2f ms\n", t1 - t0);
  // (1b) what ReservedRange::commit_range does: create + map each chunk, one access change for all
  {
    const size_t at = size_t(3) << 30;
    t0 = now_ms();
    for (size_t off = 0; off < (size_t(1) << 30); off += gran) {
      CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, gran, &prop, 0)); CK(cuMemMap(base + at + off, gran, 0, h, 0));
    }
    double tm = now_ms();
    CK(cuMemSetAccess(base + at, size_t(1) << 30, &acc, 1));
    t1 = now_ms();
    printf("map 1 GiB in chunks, one access change: %.2f ms (create+map %.2f ms, access %.2f ms)\n", t1 - t0, tm - t0, t1 - tm);
    t0 = now_ms();
    for (size_t off = 0; off < (size_t(1) << 30); off += gran) CK(cuMemUnmap(base + at + off, gran));
    t1 = now_ms();
    printf("unmap 1 GiB chunk by chunk: %.2f ms\n", t1 - t0);
  }
  // (1c) the size of one mapping: 1 GiB mapped (create + map + access) and unmapped (unmap +
  // release) in pieces of 2 MiB .. 1 GiB, each piece one allocation
  for (size_t piece = gran; piece <= (size_t(1) << 30); piece *= 4) {
    const size_t at = size_t(4) << 30, count = (size_t(1) << 30) / piece;
    CUmemGenericAllocationHandle* handles = new CUmemGenericAllocationHandle[count];
    t0 = now_ms();
    for (size_t i = 0; i < count; ++i) {
      CK(cuMemCreate(&handles[i], piece, &prop, 0)); CK(cuMemMap(base + at + i * piece, piece, 0, handles[i], 0));
      CK(cuMemSetAccess(base + at + i * piece, piece, &acc, 1));
    }
    double tm = now_ms();
    CK(cuMemsetD8(base + at, 0, size_t(1) << 30)); CK(cuCtxSynchronize());
    double tz = now_ms();
    for (size_t i = 0; i < count; ++i) { CK(cuMemUnmap(base + at + i * piece, piece)); CK(cuMemRelease(handles[i])); }
    t1 = now_ms();
    printf("piece %zu MiB: map 1 GiB %.2f ms, first memset %.2f ms, unmap+release %.2f ms\n", piece >> 20, tm - t0, tz - tm, t1 - tz);
    delete[] handles;
  }
  // (2) while a kernel runs (default stream and a non-blocking stream)
  int* flag; cudaHostAlloc(&flag, 4, cudaHostAllocMapped); *flag = 0; int* dflag; cudaHostGetDevicePointer(&dflag, flag, 0);
  for (int variant = 0; variant < 2; ++variant) {
    cudaStream_t s = 0; if (variant == 1) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *flag = 0;
    spin<<<1, 1, 0, s>>>(3000000000ull, dflag);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::atomic<double> done{0};
    double a = now_ms();
    std::thread mapper([&] { cudaSetDevice(0); size_t off = (size_t(2) << 30) + variant * gran * 4; map(off, gran); done = now_ms(); });
    mapper.join();
    double b = now_ms();
    printf("variant %s stream: map of one chunk while a 3 s kernel runs took %.2f ms\n", variant ? "non-blocking" : "legacy default", b - a);
    // copy on a non-blocking stream while kernel runs
    cudaStream_t c; cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
    unsigned long long* pinned; cudaHostAlloc(&pinned, 4096, 0);
    spin<<<1, 1, 0, s>>>(3000000000ull, dflag);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a = now_ms(); cudaMemcpy2DAsync((void*)(base), 64, pinned, 8, 8, 64, cudaMemcpyHostToDevice, c); cudaStreamSynchronize(c); b = now_ms();
    printf("variant %s: strided copy while kernel runs took %.2f ms\n", variant ? "non-blocking" : "legacy default", b - a);
    *flag = 1; cudaDeviceSynchronize();
  }
  return 0;
}
