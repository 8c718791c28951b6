// malloc_bench's alloc_then_free rows for Gallatin's global allocator (McCoy and Pandey, PPoPP
// 2024), timed as malloc_bench times soaheap::malloc: the host's clock around each kernel's launch
// and the wait for it (cudaStreamSynchronize), 256 threads per block, one request per thread, the
// best of --repeats runs. Gallatin's sources are not part of this repository; gallatin-compare.sh
// builds this file against a checkout of them. Prints one JSON line per row, with malloc_bench's
// keys ("allocator": "gallatin").
#include <gallatin/allocators/global_allocator.cuh>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr unsigned kThreadsPerBlock = 256;  // soaheap's kThreadsPerCudaBlock

__global__ void allocate_one(std::uint64_t threads, std::uint64_t bytes, void** slots, unsigned long long* failures) {
  const std::uint64_t tid = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (tid >= threads) return;
  void* memory = gallatin::allocators::global_malloc(bytes);
  if (memory == nullptr) atomicAdd(failures, 1ull);
  else *static_cast<std::uint64_t*>(memory) = tid;  // touch it, as malloc_bench does
  slots[tid] = memory;
}

__global__ void free_one(std::uint64_t threads, void** slots) {
  const std::uint64_t tid = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (tid < threads && slots[tid] != nullptr) gallatin::allocators::global_free(slots[tid]);
}

// malloc_bench's launch floor: a kernel that only reads its thread's slot.
__global__ void read_slot_only(std::uint64_t threads, void** slots, unsigned long long* failures) {
  const std::uint64_t tid = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (tid < threads && slots[tid] == static_cast<void*>(failures)) atomicAdd(failures, 1ull);  // never
}

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "gallatin_malloc: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

template <class Launch>
double timed_ms(cudaStream_t stream, const Launch& launch) {
  const auto start = std::chrono::steady_clock::now();
  launch();
  check(cudaGetLastError(), "launch");
  check(cudaStreamSynchronize(stream), "kernel");
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::uint64_t> parse_list(const std::string& text) {
  std::vector<std::uint64_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(std::stoull(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"Gallatin's global allocator in malloc_bench's alloc_then_free rows"};
  std::string sizes_text = "16,64,256,1024,4096,8192";
  std::string threads_text = "1024,16384,131072,1048576";
  std::uint64_t heap_mib = 16384;
  int repeats = 3;
  cli.add_option("--sizes", sizes_text, "bytes per request, comma-separated");
  cli.add_option("--threads", threads_text, "threads (one request each), comma-separated");
  cli.add_option("--heap-mib", heap_mib, "Gallatin's memory in MiB")->check(CLI::Range(64, 1 << 22));
  cli.add_option("--repeats", repeats, "runs per row; the best is reported")->check(CLI::Range(1, 1000));
  CLI11_PARSE(cli, argc, argv);
  const std::vector<std::uint64_t> sizes = parse_list(sizes_text);
  const std::vector<std::uint64_t> thread_counts = parse_list(threads_text);

  gallatin::allocators::init_global_allocator(heap_mib << 20, 42, false);
  std::uint64_t most_threads = 0;
  for (std::uint64_t threads : thread_counts) most_threads = threads > most_threads ? threads : most_threads;
  void** slots = nullptr;
  unsigned long long* failures = nullptr;
  check(cudaMalloc(&slots, most_threads * sizeof(void*)), "cudaMalloc");
  check(cudaMalloc(&failures, sizeof(unsigned long long)), "cudaMalloc");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  for (std::uint64_t bytes : sizes) {
    for (std::uint64_t threads : thread_counts) {
      check(cudaMemset(failures, 0, sizeof(unsigned long long)), "cudaMemset");
      check(cudaMemset(slots, 0, threads * sizeof(void*)), "cudaMemset");
      const auto grid = static_cast<unsigned>((threads + kThreadsPerBlock - 1) / kThreadsPerBlock);
      double best_alloc = 0, best_free = 0, first = 0, floor = 0;
      for (int run = 0; run < repeats; ++run) {
        const double alloc_ms = timed_ms(stream, [&] { allocate_one<<<grid, kThreadsPerBlock, 0, stream>>>(threads, bytes, slots, failures); });
        const double free_ms = timed_ms(stream, [&] { free_one<<<grid, kThreadsPerBlock, 0, stream>>>(threads, slots); });
        const double launch_ms = timed_ms(stream, [&] { read_slot_only<<<grid, kThreadsPerBlock, 0, stream>>>(threads, slots, failures); });
        if (run == 0) first = alloc_ms + free_ms;
        if (run == 0 || alloc_ms + free_ms < best_alloc + best_free) best_alloc = alloc_ms, best_free = free_ms;
        if (run == 0 || launch_ms < floor) floor = launch_ms;
      }
      unsigned long long failed = 0;
      check(cudaMemcpy(&failed, failures, sizeof(failed), cudaMemcpyDeviceToHost), "cudaMemcpy");
      const double operations = static_cast<double>(threads);
      nlohmann::json line = {{"bench", "malloc_bench"},        {"allocator", "gallatin"},
                             {"backend", "cuda"},              {"workload", "alloc_then_free"},
                             {"bytes", bytes},                 {"threads", threads},
                             {"runs", repeats},                {"alloc_ms", best_alloc},
                             {"free_ms", best_free},           {"total_ms", best_alloc + best_free},
                             {"launch_floor_ms", floor},       {"ns_per_allocation", (best_alloc + best_free) * 1e6 / operations},
                             {"first_ns_per_allocation", first * 1e6 / operations},
                             {"failed_allocations", failed}};
      std::cout << line.dump() << std::endl;
    }
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  cudaFree(slots);
  cudaFree(failures);
  gallatin::allocators::free_global_allocator();
  return 0;
}
