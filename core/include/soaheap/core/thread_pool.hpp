#pragma once
/// @file thread_pool.hpp
/// @brief The host backend's "GPU": a pool of CPU threads that runs a kernel body over a grid of
///        logical thread indices, handing out small chunks so that threads really contend.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace soaheap::detail {

class ThreadPool {
 public:
  /// Logical threads a worker claims at a time: small, so that workers interleave on the same
  /// blocks the way warps do, large enough to keep the claim counter off the profile.
  static constexpr std::uint64_t kChunk = 64;

  explicit ThreadPool(unsigned worker_count) {
    if (worker_count == 0) worker_count = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < worker_count; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

  /// @brief Runs body(tid) for tid in [0, count) on all workers; returns when all are done and
  /// rethrows the first exception a body threw.
  void run(std::uint64_t count, const std::function<void(std::uint64_t)>& body) {
    if (count == 0) return;
    std::unique_lock<std::mutex> lock(mutex_);
    body_ = &body;
    count_ = count;
    next_.store(0);
    busy_ = static_cast<unsigned>(workers_.size());
    failure_ = nullptr;
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return busy_ == 0; });
    body_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
  }

  /// Index of the calling worker (0 for threads outside the pool); seeds host-side rotation.
  static unsigned current_worker() { return worker_index(); }

 private:
  static unsigned& worker_index() {
    static thread_local unsigned index = 0;
    return index;
  }

  void work(unsigned index) {
    worker_index() = index;
    std::uint64_t seen_generation = 0;
    for (;;) {
      const std::function<void(std::uint64_t)>* body = nullptr;
      std::uint64_t count = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
        if (stopping_) return;
        seen_generation = generation_;
        body = body_;
        count = count_;
      }
      try {
        for (;;) {
          const std::uint64_t begin = next_.fetch_add(kChunk);
          if (begin >= count) break;
          const std::uint64_t end = std::min(count, begin + kChunk);
          for (std::uint64_t tid = begin; tid < end; ++tid) (*body)(tid);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!failure_) failure_ = std::current_exception();
        next_.store(count);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::uint64_t)>* body_ = nullptr;
  std::uint64_t count_ = 0;
  std::atomic<std::uint64_t> next_{0};
  unsigned busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

}  // namespace soaheap::detail
