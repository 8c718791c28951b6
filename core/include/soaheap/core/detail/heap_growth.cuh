#pragma once
/// @file heap_growth.cuh
/// @brief How a heap grows while a kernel runs: the kernel side (`grow_heap`, called by an
///        allocation that found no free block) and the host side (`HeapGrower`, a thread that maps
///        memory when asked).
///
/// The protocol, over a GrowthChannel in device memory:
/// 1. An allocation that finds the heap full raises `requested` (atomic max) to the blocks it needs;
///    the thread that raised it copies the value to a pinned host word, the grower's signal. Then
///    it waits, at most kGrowthWaitNanoseconds, reading only device memory.
/// 2. The grower thread sees the signal, maps data memory for more blocks (a step of about an
///    eighth of the heap at least, so growth keeps ahead of the allocation rate), writes the free
///    bits of the new blocks' level-0 words by copy — words no kernel has looked at, since no upper
///    bitmap level points at them yet — and copies a larger `grant` in. When it cannot (max_bytes
///    reached, no GPU memory, or the blocks whose headers and bitmaps exist used up) it copies in
///    `refused` and keeps the reason on the host. Its copies run on a stream of its own.
/// 3. Every waiting thread that sees a larger grant sets the upper bitmap levels above the new
///    words (idempotent, so any number may do it at once) and raises `published_blocks`; the
///    allocation then tries again and finds the new blocks.
/// Growth never moves anything: blocks are appended inside the heap's reserved addresses.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/runtime_state.cuh>
#include <soaheap/core/memory.cuh>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace soaheap::detail {

/// Longest a kernel waits for the host to map more memory before its allocation fails.
inline constexpr std::uint64_t kGrowthWaitNanoseconds = 10'000'000'000ull;

/// Stores to the grower's signal word (pinned host memory on cuda).
SOAHEAP_HD inline void signal_store(std::uint64_t* word, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  *reinterpret_cast<volatile unsigned long long*>(word) = value;  // host memory: no device atomics
  __threadfence_system();
#else
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
#endif
}

/// Tells the grower about a request that raised `requested` to @p value. Stores of several threads
/// may reach the host in any order; each stores again while `requested` is past what it stored,
/// so the last store carries the largest request.
SOAHEAP_HD inline void signal_request(GrowthChannel* channel, std::uint64_t value) {
  for (;;) {
    signal_store(channel->request_signal, value);
    const std::uint64_t now = atomic_load(&channel->requested);
    if (now <= value) return;
    value = now;
  }
}

/// Sets the upper bitmap levels above the free bits the grower wrote for blocks [from, to) and
/// makes them count as published.
template <class Heap>
SOAHEAP_HD void publish_grown_blocks(const Heap& heap, std::uint64_t from, std::uint64_t to) {
  const auto free_bits = heap.free_blocks();
  for (std::uint64_t w = from / 64; w < (to + 63) / 64; ++w) free_bits.refresh_parents(w);
  atomic_max(&heap.state->published_blocks, to);
}

/// @brief Asks the host for @p blocks more blocks and waits for them. True once the heap has grown
/// (the caller looks for a block again), false when it cannot grow (a fixed heap, the limit, no
/// memory, or no answer within kGrowthWaitNanoseconds).
template <class Heap>
SOAHEAP_HD bool grow_heap(const Heap& heap, std::uint64_t blocks) {
  GrowthChannel* channel = heap.state->growth;
  if (channel == nullptr) return false;
  const std::uint64_t published = atomic_load(&heap.state->published_blocks);
  const std::uint64_t limit = atomic_load(&heap.state->block_limit);
  if (published >= limit) return false;
  const std::uint64_t target = published + blocks < limit ? published + blocks : limit;
  if (atomic_max(&channel->requested, target) < target) signal_request(channel, target);
#if SOAHEAP_DEVICE_CODE
  const std::uint64_t start = global_nanoseconds();
#else
  const auto start = std::chrono::steady_clock::now();
#endif
  for (int round = 0;; ++round) {
    const std::uint64_t grant = atomic_load(&channel->grant);
    if (grant > published) {
      memory_fence();
      publish_grown_blocks(heap, published, grant);
      return true;
    }
    if (atomic_load(&channel->refused) >= target) return false;
    // A store to the host that lost a race with a smaller one is repeated now and then.
    if (round % 1024 == 1023 && atomic_load(&channel->requested) == target) signal_store(channel->request_signal, target);
#if SOAHEAP_DEVICE_CODE
    const bool expired = global_nanoseconds() - start > kGrowthWaitNanoseconds;
#else
    const bool expired = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                        std::chrono::steady_clock::now() - start).count()) >
                         kGrowthWaitNanoseconds;
#endif
    if (expired) {
      // The host did not answer: its thread may be blocked in a call that waits for this kernel
      // (cudaFree does, under a driver lock that mapping needs too). Give up for the whole kernel.
      atomic_max(&channel->refused, kGrowthGaveUp);
      signal_store(channel->gave_up_signal, 1);
      return false;
    }
#if SOAHEAP_DEVICE_CODE
    __nanosleep(round < 8 ? 256u : 4096u);
#else
    if (round < 8) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
#endif
    // Another thread may have published a grant we have not seen as larger than our start.
    if (atomic_load(&heap.state->published_blocks) > published) return true;
  }
}

/// @brief The host side: a thread that answers the requests of kernels (and the heap's own calls
/// between kernels) by calling `grow(target)`, which maps and writes what the new blocks need and
/// returns the blocks the heap has now or why it could not grow. One growth at a time (`mutex()`).
class HeapGrower {
 public:
  /// Blocks the heap has after the call, and the reason when that is fewer than asked for.
  struct Result {
    std::uint64_t blocks;
    GrowthRefusal refusal;
  };
  using Grow = std::function<Result(std::uint64_t target)>;

  HeapGrower(Backend backend, std::uint64_t blocks, Grow grow)
      : grow_(std::move(grow)), backend_(backend), channel_(backend, sizeof(GrowthChannel)), granted_(blocks) {
    GrowthChannel initial{blocks, blocks, 0, nullptr, nullptr};
    if (backend == Backend::cuda) {
      // [0] the request signal, [1..3] staging for the copies of requested, grant and refused.
      pinned_ = MappedWord(backend, blocks, 4);
      pinned_gave_up_ = MappedWord(backend, 0);
      signal_ = pinned_.host();
      gave_up_ = pinned_gave_up_.host();
      initial.request_signal = pinned_.device();
      initial.gave_up_signal = pinned_gave_up_.device();
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaGetDevice(&device_index_));
      // Its copies must not wait for the heap's kernels, which may be waiting for them.
      SOAHEAP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
#endif
    } else {
      own_signal_ = blocks;
      signal_ = initial.request_signal = &own_signal_;
      gave_up_ = initial.gave_up_signal = &own_gave_up_;
    }
    channel_.copy_from_host(0, &initial, sizeof(initial));
    thread_ = std::thread([this] { run(); });
  }
  HeapGrower(const HeapGrower&) = delete;
  HeapGrower& operator=(const HeapGrower&) = delete;
  ~HeapGrower() {
    {
      std::lock_guard<std::mutex> lock(wake_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
#if SOAHEAP_HAS_CUDA
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
  }
#if SOAHEAP_HAS_CUDA
  /// The grower's own stream (cuda): copies on it run while the heap's kernels wait.
  cudaStream_t stream() const { return stream_; }
#endif

  /// The channel as kernels see it.
  GrowthChannel* device_channel() const { return channel_.as<GrowthChannel>(); }
  /// Held for each growth; the heap holds it too while it changes the blocks between kernels.
  std::mutex& mutex() { return mutex_; }

  /// Grows to at least @p target blocks now, from the calling host thread (between kernels).
  Result grow_now(std::uint64_t target) {
    std::lock_guard<std::mutex> lock(mutex_);
    return answer(target);
  }
  /// Tells the channel that the heap has @p blocks now (after a trim gave blocks back). The caller
  /// holds mutex() and no kernel runs.
  void reset(std::uint64_t blocks) {
    granted_ = blocks;
    refused_ = 0;
    __atomic_store_n(signal_, blocks, __ATOMIC_SEQ_CST);
    tell_kernels(true);
  }

  /// Why the last request that could not be met was refused.
  GrowthRefusal refusal() const {
    // A kernel that gave up counts before the grower thread has seen its flag.
    if (__atomic_load_n(gave_up_, __ATOMIC_SEQ_CST) != 0) return GrowthRefusal::no_answer;
    return refused_reason_.load();
  }
  /// Longest time from a kernel's request being seen to its grant, and the growths so far.
  std::uint64_t longest_answer_nanoseconds() const { return longest_answer_.load(); }
  std::uint64_t growths() const { return growths_.load(); }

 private:
  Result answer(std::uint64_t target) {
    const Result result = grow_(target);
    if (result.blocks > granted_) granted_ = result.blocks;
    if (result.blocks < target && result.refusal != GrowthRefusal::none) {
      refused_reason_ = result.refusal;
      refused_ = target;
    }
    tell_kernels(false);
    growths_.fetch_add(1);
    return result;
  }

  /// Copies grant and refused into the channel, and requested too (as the grant) on a reset.
  void tell_kernels(bool reset_request) {
    GrowthChannel* channel = device_channel();
    if (backend_ == Backend::host) {
      if (reset_request) atomic_store(&channel->requested, granted_);
      atomic_store(&channel->grant, granted_);
      atomic_store(&channel->refused, refused_);
      return;
    }
#if SOAHEAP_HAS_CUDA
    std::uint64_t* staging = pinned_.host() + 1;
    staging[0] = staging[1] = granted_;
    staging[2] = refused_;
    const int first = reset_request ? 0 : 1;
    static_assert(offsetof(GrowthChannel, grant) == offsetof(GrowthChannel, requested) + 8 &&
                  offsetof(GrowthChannel, refused) == offsetof(GrowthChannel, grant) + 8);
    SOAHEAP_CUDA_CHECK(cudaMemcpyAsync(&channel->requested + first, staging + first, (3 - first) * sizeof(std::uint64_t),
                                       cudaMemcpyHostToDevice, stream_));
    SOAHEAP_CUDA_CHECK(cudaStreamSynchronize(stream_));
#endif
  }

  void run() {
#if SOAHEAP_HAS_CUDA
    if (stream_ != nullptr) cudaSetDevice(device_index_);
#endif
    int idle = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(wake_mutex_);
        // Polls: a kernel cannot signal a host thread. Quickly while requests come, more slowly when
        // idle (every 100 us: a kernel that asks after a quiet spell waits no longer than that).
        wake_.wait_for(lock, std::chrono::microseconds(idle < 100 ? 10 : 100), [this] { return stop_; });
        if (stop_) return;
      }
      const auto start = std::chrono::steady_clock::now();
      bool answered = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (__atomic_exchange_n(gave_up_, 0, __ATOMIC_SEQ_CST) != 0) {
          // A kernel waited in vain; kernels may grow again (tell_kernels below clears refused).
          refused_reason_ = GrowthRefusal::no_answer;
          tell_kernels(false);
        }
        const std::uint64_t request = __atomic_load_n(signal_, __ATOMIC_SEQ_CST);
        if (request > granted_ && request > refused_) {
          answer(request);
          answered = true;
        }
      }
      if (!answered) {
        ++idle;
        continue;
      }
      idle = 0;
      const auto took = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
      std::uint64_t longest = longest_answer_.load();
      while (took > longest && !longest_answer_.compare_exchange_weak(longest, took)) {
      }
    }
  }

  Grow grow_;
  Backend backend_;
  Memory channel_;              ///< the GrowthChannel (device memory on cuda)
  MappedWord pinned_;           ///< cuda: the signal word and the staging of the channel's copies
  MappedWord pinned_gave_up_;   ///< cuda: the gave-up flag
  std::uint64_t own_signal_ = 0;  ///< host: the signal word
  std::uint64_t own_gave_up_ = 0;
  std::uint64_t* signal_ = nullptr;
  std::uint64_t* gave_up_ = nullptr;
  // The host's side of the channel, changed under mutex_.
  std::uint64_t granted_;
  std::uint64_t refused_ = 0;
  std::atomic<GrowthRefusal> refused_reason_{GrowthRefusal::none};
  std::mutex mutex_;
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<std::uint64_t> longest_answer_{0};
  std::atomic<std::uint64_t> growths_{0};
#if SOAHEAP_HAS_CUDA
  cudaStream_t stream_ = nullptr;
  int device_index_ = 0;
#endif
  std::thread thread_;
};

}  // namespace soaheap::detail
