#pragma once
/// @file local_group.hpp
/// @brief LocalGroup: N ranks as N threads of one process, each with its own heap, talking through
///        shared memory. It implements the same Transport as NCCL does, so migration and the
///        applications run unchanged on it: the tests use it on the host backend (no GPU, no MPI), and
///        a program can split one GPU into several in-process ranks to check that its result does not
///        depend on the rank count. Copies are memcpy (host backend) or cudaMemcpy (cuda backend,
///        in translation units compiled by nvcc).

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/distributed/transport.hpp>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace soaheap::distributed {

class LocalGroup {
 public:
  /// @throw invalid_argument for size < 1, or a cuda group in a translation unit without nvcc
  LocalGroup(int size, Backend backend) : size_(size), backend_(backend) {
    if (size < 1) throw invalid_argument("soaheap: a LocalGroup needs at least one rank, not " + std::to_string(size));
    if (backend == Backend::cuda && !SOAHEAP_HAS_CUDA)
      throw invalid_argument("soaheap: a cuda LocalGroup must be made in a translation unit compiled by nvcc");
    posted_.resize(static_cast<std::size_t>(size) * size);
    counts_.resize(static_cast<std::size_t>(size) * size);
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const { return size_; }
  Backend backend() const { return backend_; }
  Transport& transport(int rank) { return *ranks_.at(static_cast<std::size_t>(rank)); }

  /// @brief Runs body(transport) once per rank, each on its own thread, and waits for all. When a
  /// rank throws, the others' next collective call throws too (nothing waits forever), and the
  /// first exception is rethrown here.
  template <class Body>
  void run(Body body) {
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size_));
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r) {
      threads.emplace_back([&, r] {
        try {
          body(transport(r));
          depart();
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
          abort_all(r);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    // The rank that failed first; the others only saw its failure.
    std::exception_ptr first = first_failed_ >= 0 ? errors[static_cast<std::size_t>(first_failed_)] : nullptr;
    reset();
    if (first) std::rethrow_exception(first);
  }

 private:
  class Rank final : public Transport {
   public:
    Rank(LocalGroup& group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_.size_; }
    std::string name() const override { return "local"; }

    void exchange_counts(const std::uint64_t* send, std::uint64_t* received) override {
      const int n = group_.size_;
      for (int p = 0; p < n; ++p) group_.counts_[static_cast<std::size_t>(rank_) * n + p] = send[p];
      group_.barrier();
      for (int p = 0; p < n; ++p) received[p] = group_.counts_[static_cast<std::size_t>(p) * n + rank_];
      group_.barrier();
    }

    /// One round for every width: the rows go through a matrix sized before the first barrier.
    void exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) override {
      if (width < 1) throw invalid_argument("soaheap: exchange_count_rows: width " + std::to_string(width) + " < 1");
      const auto n = static_cast<std::size_t>(group_.size_);
      const auto w = static_cast<std::size_t>(width);
      {
        std::lock_guard<std::mutex> lock(group_.mutex_);
        if (group_.rows_.size() < n * n * w) group_.rows_.resize(n * n * w);
      }
      group_.barrier();
      const auto me = static_cast<std::size_t>(rank_);
      for (std::size_t i = 0; i < n * w; ++i) group_.rows_[me * n * w + i] = send[i];
      group_.barrier();
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t k = 0; k < w; ++k) received[p * w + k] = group_.rows_[p * n * w + me * w + k];
      group_.barrier();
    }

    void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) override {
      const int n = group_.size_;
      for (const Message& message : sends) {
        check_peer(message, "send");
        group_.posted_[static_cast<std::size_t>(rank_) * n + message.peer] = message;
      }
      for (const Message& message : receives) check_peer(message, "receive");
      group_.barrier();
      // A problem is raised only after the second barrier: until every receiver has copied, the
      // senders' buffers must stay alive (an exception would unwind the stack that owns them).
      std::string problem;
      std::exception_ptr copy_error;
      for (const Message& message : receives) {
        const Message& sent = group_.posted_[static_cast<std::size_t>(message.peer) * n + rank_];
        if (sent.bytes != message.bytes) {
          if (problem.empty())
            problem = "soaheap: rank " + std::to_string(rank_) + " expects " + std::to_string(message.bytes) +
                      " bytes from rank " + std::to_string(message.peer) + ", which sent " +
                      (sent.data == nullptr ? std::string("nothing") : std::to_string(sent.bytes));
          continue;
        }
        try {
          group_.copy(message.data, sent.data, message.bytes);
        } catch (...) {
          if (!copy_error) copy_error = std::current_exception();
        }
      }
      group_.barrier();  // every receiver has copied: the senders may reuse their buffers
      for (int p = 0; p < n; ++p) group_.posted_[static_cast<std::size_t>(rank_) * n + p] = Message{};
      if (!problem.empty()) group_.fail(rank_, problem);
      if (copy_error) {
        group_.abort_all(rank_);
        std::rethrow_exception(copy_error);
      }
    }

    void all_reduce_sum(std::uint64_t* values, int count) override {
      const int n = group_.size_;
      {
        std::lock_guard<std::mutex> lock(group_.mutex_);
        if (group_.sums_.size() < static_cast<std::size_t>(n) * count) group_.sums_.resize(static_cast<std::size_t>(n) * count);
      }
      group_.barrier();
      for (int i = 0; i < count; ++i) group_.sums_[static_cast<std::size_t>(rank_) * count + i] = values[i];
      group_.barrier();
      for (int i = 0; i < count; ++i) {
        std::uint64_t sum = 0;
        for (int r = 0; r < n; ++r) sum += group_.sums_[static_cast<std::size_t>(r) * count + i];
        values[i] = sum;
      }
      group_.barrier();
    }

   private:
    void check_peer(const Message& message, const char* what) const {
      if (message.peer < 0 || message.peer >= group_.size_ || message.peer == rank_)
        throw invalid_argument("soaheap: " + std::string(what) + " of rank " + std::to_string(rank_) + " names peer " +
                               std::to_string(message.peer) + ", not another rank of the " +
                               std::to_string(group_.size_) + "-rank group");
    }
    LocalGroup& group_;
    int rank_;
  };

  /// All ranks wait here until each has arrived; throws once a rank has failed or has finished
  /// (a collective call that another rank never makes would otherwise wait forever).
  void barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto refuse = [&] {
      throw usage_error(aborted_ ? "soaheap: another rank of the LocalGroup failed"
                                 : "soaheap: a collective call of the LocalGroup that a finished rank did not make");
    };
    if (aborted_ || departed_ != 0) refuse();
    const std::uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation || aborted_ || departed_ != 0; });
    if (generation_ == generation) refuse();
  }
  void depart() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++departed_;
    changed_.notify_all();
  }
  void abort_all(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_) first_failed_ = rank;
    aborted_ = true;
    changed_.notify_all();
  }
  [[noreturn]] void fail(int rank, const std::string& message) {
    abort_all(rank);
    throw usage_error(message);
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
    departed_ = 0;
    first_failed_ = -1;
    for (Message& message : posted_) message = Message{};
  }
  void copy(void* destination, const void* source, std::uint64_t bytes) const {
    if (bytes == 0) return;
    if (backend_ == Backend::host) {
      std::memcpy(destination, source, bytes);
      return;
    }
#if SOAHEAP_HAS_CUDA
    SOAHEAP_CUDA_CHECK(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToDevice));
#endif
  }

  int size_;
  Backend backend_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<Message> posted_;         ///< [from * size + to]: the send rank `from` posted to `to`
  std::vector<std::uint64_t> counts_;   ///< [from * size + to]
  std::vector<std::uint64_t> sums_;     ///< [rank * count + i]
  std::vector<std::uint64_t> rows_;     ///< [from][to][k] of exchange_count_rows
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  int departed_ = 0;  ///< ranks whose body returned
  int first_failed_ = -1;
};

}  // namespace soaheap::distributed
