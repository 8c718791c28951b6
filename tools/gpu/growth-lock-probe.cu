// Which of the grower thread's calls still complete while another host thread is blocked in a call
// that waits for a running kernel (docs/decisions/027: a kernel waiting for growth behind the
// program's own cudaMemcpy waited 10 s)? A kernel spins until a flag in mapped host memory is set
// (or 2 s pass); the main thread blocks in one of the waiting calls; a second thread runs one of the
// grower's operations, then sets the flag. An operation that took about 2 s waited for the kernel.
// Build and run on a GPU machine: nvcc -arch=sm_90 -O2 -o growth-lock-probe tools/gpu/growth-lock-probe.cu -lcuda
// && CUDA_MODULE_LOADING=LAZY ./growth-lock-probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#define CK(x) do { if ((x) != 0) { std::printf("%s failed at line %d\n", #x, __LINE__); std::exit(1); } } while (0)

__global__ void spin(volatile int* flag, unsigned long long limit_ns) {
  unsigned long long start; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (*flag != 0 || now - start > limit_ns) break;
    __nanosleep(2000);
  }
}
__global__ void tiny(int* word) { *word = 1; }
template <int kVariant>
__global__ void first_launch(int* word) { *word = kVariant; }  // loaded at its first launch under CUDA_MODULE_LOADING=LAZY
template <int... kVariants>
void launch_first(int variant, int* word, std::integer_sequence<int, kVariants...>) {
  ((variant == kVariants ? (first_launch<kVariants><<<1, 1>>>(word), 0) : 0), ...);
}

static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main() {
  CK(cudaFree(0));
  CUdevice dev; CK(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;
  size_t gran = 0; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUdeviceptr base; CK(cuMemAddressReserve(&base, size_t(64) << 30, gran, 0, 0));
  CUmemAccessDesc acc{}; acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc.location.id = dev; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  int* flag = nullptr; CK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
  int* flag_dev = nullptr; CK(cudaHostGetDevicePointer(&flag_dev, flag, 0));
  unsigned long long* pinned = nullptr; CK(cudaHostAlloc(&pinned, 4096, cudaHostAllocMapped));
  std::memset(pinned, 0xff, 4096);
  unsigned long long* device_words = nullptr; CK(cudaMalloc(&device_words, 4096));
  int* device_int = nullptr; CK(cudaMalloc(&device_int, sizeof(int)));
  cudaStream_t side; CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaStream_t work; CK(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking));
  std::vector<char> pageable(1 << 20);
  size_t offset = 0;

  const char* blockers[] = {"cudaMemcpy D2H pageable (legacy stream)", "cudaMemcpy H2D pageable (legacy stream)",
                            "cudaMemcpyAsync D2H pageable on the kernel's stream", "cudaStreamSynchronize(kernel's stream)",
                            "cudaDeviceSynchronize", "cudaFree", "first launch of a kernel (lazy loading)", "cudaFreeHost"};
  const char* operations[] = {"cuMemCreate+cuMemMap+cuMemSetAccess 2 MiB", "cudaMemcpyAsync H2D 8 B pinned + sync (non-blocking stream)",
                              "cudaMemcpy2DAsync H2D pinned + sync (non-blocking stream)", "tiny kernel + sync (non-blocking stream)",
                              "cuMemsetD32Async + sync (non-blocking stream)"};
  for (int blocker = 0; blocker < 8; ++blocker) {
    for (int operation = 0; operation < 5; ++operation) {
      *static_cast<volatile int*>(flag) = 0;
      const bool legacy = blocker <= 1 || blocker >= 4;
      spin<<<1, 32, 0, legacy ? 0 : work>>>(flag_dev, 2000000000ull);
      CK(cudaGetLastError());
      double took = -1;
      std::thread grower([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const double start = now_ms();
        if (operation == 0) {
          CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, gran, &prop, 0));
          CK(cuMemMap(base + offset, gran, 0, h, 0)); CK(cuMemSetAccess(base + offset, gran, &acc, 1));
          offset += gran;
        } else if (operation == 1) {
          CK(cudaMemcpyAsync(device_words, pinned, 8, cudaMemcpyHostToDevice, side)); CK(cudaStreamSynchronize(side));
        } else if (operation == 2) {
          CK(cudaMemcpy2DAsync(device_words, 64, pinned, 8, 8, 16, cudaMemcpyHostToDevice, side)); CK(cudaStreamSynchronize(side));
        } else if (operation == 3) {
          tiny<<<1, 1, 0, side>>>(device_int); CK(cudaStreamSynchronize(side));
        } else {
          CK(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(device_words), 0, 16, side)); CK(cudaStreamSynchronize(side));
        }
        took = now_ms() - start;
        *static_cast<volatile int*>(flag) = 1;
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const double start = now_ms();
      if (blocker == 0) CK(cudaMemcpy(pageable.data(), device_words, 64, cudaMemcpyDeviceToHost));
      else if (blocker == 1) CK(cudaMemcpy(device_words, pageable.data(), 64, cudaMemcpyHostToDevice));
      else if (blocker == 2) { CK(cudaMemcpyAsync(pageable.data(), device_words, 64, cudaMemcpyDeviceToHost, work)); }
      else if (blocker == 3) CK(cudaStreamSynchronize(work));
      else if (blocker == 4) CK(cudaDeviceSynchronize());
      else if (blocker == 5) { void* p = nullptr; CK(cudaMalloc(&p, 1 << 20)); CK(cudaFree(p)); }
      else if (blocker == 6) launch_first(operation, device_int, std::make_integer_sequence<int, 5>{});
      else { void* p = nullptr; CK(cudaMallocHost(&p, 4096)); CK(cudaFreeHost(p)); }
      const double blocked = now_ms() - start;
      grower.join();
      CK(cudaDeviceSynchronize());
      std::printf("%-55s | %-62s | op %8.2f ms | main blocked %8.2f ms%s\n", blockers[blocker], operations[operation], took, blocked,
                  took > 1500 ? "  <-- WAITED FOR THE KERNEL" : "");
      std::fflush(stdout);
    }
  }
  return 0;
}
