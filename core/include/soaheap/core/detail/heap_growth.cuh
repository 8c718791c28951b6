#pragma once
/// @file heap_growth.cuh
/// @brief How a heap grows while a kernel runs: the kernel side (`grow_heap`, called by an
///        allocation that found no free block) and the host side (`HeapGrower`, a thread that maps
///        memory when asked).
///
/// The protocol, over a GrowthChannel:
/// 1. An allocation that finds the heap full raises `requested` (atomic max) to the blocks it needs;
///    the thread that raised it copies the value to a pinned host word, the grower's signal. Then
///    it waits, at most kGrowthWaitNanoseconds.
/// 2. The grower thread sees the signal, maps data memory for more blocks (a step of about a
///    sixteenth of the heap at least, so growth keeps ahead of the allocation rate) and writes its
///    answer — the blocks mapped, or the request it could not meet (max_bytes reached, no GPU
///    memory, or the blocks whose headers and bitmaps exist used up; the reason stays on the host)
///    — into pinned host words. It calls nothing but the driver's mapping functions: a copy, a
///    memset or a kernel on any stream waits for every running kernel while another host thread is
///    blocked in cudaMemcpy or cudaFree, and mapping does not (tools/gpu/growth-lock-probe.cu).
/// 3. One waiting thread at a time (the reader) takes a new answer: it sets the new blocks' free
///    bits and the bitmap levels above them (BitmapView::set_new_run) and raises `written` and
///    `published_blocks`. Every waiting thread then finds the new blocks. Between kernels the host
///    takes answers no waiting thread took with a one-thread kernel (which waits for the token).
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

/// Takes the grower's latest answer unless another thread is taking it: publishes the blocks it
/// mapped (their free bits and the levels above, then `published_blocks`) and its refusal, which
/// also clears a kernel's give-up. Returns false when another thread held the reader's token.
template <class Heap>
SOAHEAP_HD bool take_growth_answer(const Heap& heap) {
  GrowthChannel* channel = heap.state->growth;
  if (atomic_cas(&channel->reader, 0, 1) != 0) return false;
  const std::uint64_t count = atomic_load(channel->answer + kAnswerCount);  // pinned host memory on cuda
  if (count != atomic_load(&channel->answers_taken)) {
#if SOAHEAP_DEVICE_CODE
    __threadfence_system();  // the grower writes the count last
#endif
    const std::uint64_t mapped = atomic_load(channel->answer + kAnswerBlocks);
    const std::uint64_t refused = atomic_load(channel->answer + kAnswerRefused);
    const std::uint64_t written = atomic_load(&channel->written);
    if (mapped > written) {
      heap.free_blocks().set_new_run(written, mapped);
      atomic_store(&channel->written, mapped);
      memory_fence();
      atomic_max(&heap.state->published_blocks, mapped);
    }
    memory_fence();  // a waiter that sees the refusal sees the blocks granted with it
    atomic_store(&channel->refused, refused);
    atomic_store(&channel->answers_taken, count);
  }
  memory_fence();
  atomic_store(&channel->reader, 0);
  return true;
}

/// Time since a wait began, on the GPU's global timer in device code.
class GrowthWaitClock {
 public:
  SOAHEAP_HD GrowthWaitClock() {
#if SOAHEAP_DEVICE_CODE
    start_ = global_nanoseconds();
#else
    start_ = std::chrono::steady_clock::now();
#endif
  }
  /// True once kGrowthWaitNanoseconds have passed.
  SOAHEAP_HD bool expired() const {
#if SOAHEAP_DEVICE_CODE
    return global_nanoseconds() - start_ > kGrowthWaitNanoseconds;
#else
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start_).count()) > kGrowthWaitNanoseconds;
#endif
  }
  /// Backs off a little, more after the first rounds.
  SOAHEAP_HD static void pause(int round) {
#if SOAHEAP_DEVICE_CODE
    __nanosleep(round < 8 ? 256u : 4096u);
#else
    if (round < 8) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
#endif
  }

 private:
#if SOAHEAP_DEVICE_CODE
  std::uint64_t start_;
#else
  std::chrono::steady_clock::time_point start_;
#endif
};

/// Takes the grower's latest answer, waiting while another thread holds the reader's token (it may
/// have read the answer count before the latest answer came). Bounded like every growth wait.
template <class Heap>
SOAHEAP_HD void take_growth_answer_waiting(const Heap& heap) {
  const GrowthWaitClock clock;
  for (int round = 0; !take_growth_answer(heap) && !clock.expired(); ++round) GrowthWaitClock::pause(round);
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
  const GrowthWaitClock clock;
  for (int round = 0;; ++round) {
    take_growth_answer(heap);
    if (atomic_load(&heap.state->published_blocks) > published) return true;
    if (atomic_load(&channel->refused) >= target) {
      // Refused, but the same answer may have granted part of it (published before the refusal).
      memory_fence();
      return atomic_load(&heap.state->published_blocks) > published;
    }
    // A store to the host that lost a race with a smaller one is repeated now and then.
    if (round % 1024 == 1023 && atomic_load(&channel->requested) == target) signal_store(channel->request_signal, target);
    if (clock.expired()) {
      // The host did not answer (its grower thread stopped?). Give up for the whole kernel.
      atomic_max(&channel->refused, kGrowthGaveUp);
      signal_store(channel->gave_up_signal, 1);
      return false;
    }
    GrowthWaitClock::pause(round);
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

  /// @param blocks blocks mapped at the start: the first answer, which the heap's first
  ///        publication takes (their free bits are not set yet)
  HeapGrower(Backend backend, std::uint64_t blocks, Grow grow)
      : grow_(std::move(grow)), backend_(backend), channel_(backend, sizeof(GrowthChannel)), granted_(blocks) {
    GrowthChannel initial{blocks, 0, 0, 0, 0, nullptr, nullptr, nullptr};
    if (backend == Backend::cuda) {
      pinned_ = MappedWord(backend, 0, 1 + kAnswerWords);  // the request signal, then the answer
      pinned_gave_up_ = MappedWord(backend, 0);
      words_ = pinned_.host();
      gave_up_ = pinned_gave_up_.host();
      initial.request_signal = pinned_.device();
      initial.gave_up_signal = pinned_gave_up_.device();
      initial.answer = pinned_.device() + 1;
    } else {
      words_ = own_words_;
      gave_up_ = initial.gave_up_signal = &own_gave_up_;
      initial.request_signal = own_words_;
      initial.answer = own_words_ + 1;
    }
    __atomic_store_n(words_, blocks, __ATOMIC_SEQ_CST);
    channel_.copy_from_host(0, &initial, sizeof(initial));
    tell_kernels();
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
  }

  /// The channel as kernels see it.
  GrowthChannel* device_channel() const { return channel_.as<GrowthChannel>(); }
  /// Held for each growth; the heap holds it too while it changes the blocks between kernels.
  std::mutex& mutex() { return mutex_; }

  /// Grows to at least @p target blocks now, from the calling host thread (between kernels).
  Result grow_now(std::uint64_t target) {
    std::lock_guard<std::mutex> lock(mutex_);
    return answer(target);
  }
  /// Tells the channel that the heap has @p blocks now, their free bits set (after a trim gave
  /// blocks back). The caller holds mutex() and no kernel runs.
  void reset(std::uint64_t blocks) {
    granted_ = blocks;
    refused_ = 0;
    __atomic_store_n(words_, blocks, __ATOMIC_SEQ_CST);
    const std::uint64_t count = tell_kernels();
    const std::uint64_t state[] = {blocks, blocks, 0, 0, count};  // requested .. answers_taken
    static_assert(offsetof(GrowthChannel, requested) == 0 && offsetof(GrowthChannel, answers_taken) == 4 * sizeof(std::uint64_t));
    channel_.copy_from_host(0, state, sizeof(state));
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
    tell_kernels();
    growths_.fetch_add(1);
    return result;
  }

  /// Writes the answer (blocks granted, the last refused request) and counts it; returns the count.
  std::uint64_t tell_kernels() {
    std::uint64_t* answer = words_ + 1;
    __atomic_store_n(answer + kAnswerBlocks, granted_, __ATOMIC_SEQ_CST);
    __atomic_store_n(answer + kAnswerRefused, refused_, __ATOMIC_SEQ_CST);
    return __atomic_add_fetch(answer + kAnswerCount, 1, __ATOMIC_SEQ_CST);  // last: readers take the two above
  }

  void run() {
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
          tell_kernels();
        }
        const std::uint64_t request = __atomic_load_n(words_, __ATOMIC_SEQ_CST);
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
  MappedWord pinned_;           ///< cuda: the request signal, then the answer
  MappedWord pinned_gave_up_;   ///< cuda: the gave-up flag
  std::uint64_t own_words_[1 + kAnswerWords] = {};  ///< host: the request signal, then the answer
  std::uint64_t own_gave_up_ = 0;
  std::uint64_t* words_ = nullptr;   ///< the request signal, then the answer (pinned_ or own_words_)
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
  std::thread thread_;
};

}  // namespace soaheap::detail
