// MpiTransport (mpi_transport.hpp): the only file besides mpi_session.cpp that includes mpi.h.
#include <soaheap/distributed/mpi_transport.hpp>

#include "mpi_check.hpp"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_Query_cuda_support, where the MPI library has it (Open MPI)
#endif
#if SOAHEAP_MPI_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace soaheap::distributed {
namespace {

// Tags of the transport's own communicator: failure notices may arrive at any time; headers carry
// counts and sums (one tag for both, so that ranks making different calls still meet and can say
// so); data carries the messages of exchange().
constexpr int kFailureTag = 1;
constexpr int kHeaderTag = 2;
constexpr int kDataTag = 3;
// A header: magic, operation, sequence number of the call, width (values per peer), then the values.
constexpr std::uint64_t kHeaderMagic = 0x736f616865617031ull;
constexpr std::size_t kHeaderWords = 4;
enum Operation : std::uint64_t { kCounts = 1, kSum = 2 };
// MPI counts are int: larger messages go as several pieces of at most this many bytes, in order.
constexpr std::uint64_t kLargestPiece = std::uint64_t{1} << 30;
// Polls before the loop starts to sleep between polls (several processes may share a core).
constexpr int kPollsBeforeSleeping = 2000;
constexpr auto kPollSleep = std::chrono::microseconds(20);
// A failure notice carries at most this much of the failed rank's message.
constexpr std::size_t kLongestNotice = 4000;
// Requests left by an abandoned call: how long cancelled receives get to finish.
constexpr double kCancelSeconds = 1.0;

const char* operation_name(std::uint64_t operation) {
  switch (operation) {
    case kCounts: return "exchange_counts";
    case kSum: return "all_reduce_sum";
    default: return "an unknown call";
  }
}

using detail::mpi_message;
void check_mpi(int result, const char* call) { detail::check_mpi(result, call, "soaheap: MpiTransport"); }

#if SOAHEAP_MPI_WITH_CUDA
void check_cuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  throw cuda_error(std::string("soaheap: MpiTransport: ") + call + " failed: " + cudaGetErrorString(result));
}

/// Pinned host memory of at least @p bytes, kept and grown (staging of the cuda backend's messages).
struct PinnedBuffer {
  unsigned char* pointer = nullptr;
  std::size_t bytes = 0;
  unsigned char* ensure(std::size_t wanted) {
    if (bytes >= wanted) return pointer;
    if (pointer != nullptr) cudaFreeHost(pointer);
    pointer = nullptr;
    bytes = 0;
    const std::size_t grown = wanted + wanted / 4;
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pointer), grown), "cudaMallocHost (staging)");
    bytes = grown;
    return pointer;
  }
  ~PinnedBuffer() {
    if (pointer != nullptr) cudaFreeHost(pointer);
  }
};
#endif

#if SOAHEAP_MPI_WITH_CUDA
bool mpi_reports_cuda_support() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  // The compile-time macro may say 0 while the library loaded at run time says yes (or the
  // reverse): the run-time answer decides.
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}
#endif

double timeout_from(const MpiTransportOptions& options) {
  if (options.timeout_seconds < 0)
    throw invalid_argument("soaheap: MpiTransportOptions::timeout_seconds is " + std::to_string(options.timeout_seconds) +
                           "; it must be positive (0: SOAHEAP_MPI_TIMEOUT or the default)");
  if (options.timeout_seconds > 0) return options.timeout_seconds;
  const char* text = std::getenv("SOAHEAP_MPI_TIMEOUT");
  if (text == nullptr || *text == '\0') return MpiTransportOptions::kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0))
    throw invalid_argument(std::string("soaheap: SOAHEAP_MPI_TIMEOUT='") + text + "' is not a positive number of seconds");
  return seconds;
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

}  // namespace

struct MpiTransport::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  Backend backend = Backend::host;
  int device = -1;
  bool device_pointers = false;
  double timeout = MpiTransportOptions::kDefaultTimeoutSeconds;
  int uncaught_at_construction = 0;
  std::uint64_t calls = 0;             ///< collective calls made, the sequence number of headers
  std::exception_ptr refusal;          ///< set once a call failed in a way that leaves the ranks out of step
  bool peer_failed = false;            ///< the refusal is a failure another rank reported
  std::vector<MPI_Request> receiving;  ///< receives of the call in progress
  std::vector<MPI_Request> sending;    ///< sends of the call in progress
  std::vector<std::vector<std::uint64_t>> header_out;
  std::vector<std::vector<std::uint64_t>> header_in;
  std::string notice;  ///< this rank's failure notice (outlives its sends)
#if SOAHEAP_MPI_WITH_CUDA
  PinnedBuffer send_stage;
  PinnedBuffer receive_stage;
#endif

  std::string who() const { return "rank " + std::to_string(rank) + " of " + std::to_string(size); }

  /// Throws when an earlier call left this transport unusable.
  void refuse_if_broken() const {
    if (refusal) std::rethrow_exception(refusal);
  }

  /// Gives up the requests of the call in progress: receives are cancelled (their buffers belong to
  /// the caller), sends are released to complete on their own.
  void abandon() noexcept {
    for (MPI_Request& request : receiving)
      if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kCancelSeconds);
    for (MPI_Request& request : receiving) {
      int done = 0;
      while (request != MPI_REQUEST_NULL && !done && std::chrono::steady_clock::now() < deadline)
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (request != MPI_REQUEST_NULL && !done) MPI_Request_free(&request);
    }
    for (MPI_Request& request : sending)
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    receiving.clear();
    sending.clear();
  }

  /// Throws rank_failed when another rank has sent a failure notice.
  void check_notices(const std::function<std::string()>& waiting_for) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kFailureTag, comm, &found, &message, &status), "MPI_Improbe (failure notices)");
    if (!found) return;
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<std::size_t>(length > 0 ? length : 0), '\0');
    check_mpi(MPI_Mrecv(text.data(), length, MPI_CHAR, &message, MPI_STATUS_IGNORE), "MPI_Mrecv (failure notice)");
    const int failed = status.MPI_SOURCE;
    abandon();
    refusal = std::make_exception_ptr(rank_failed(
        failed, "soaheap: rank " + std::to_string(failed) + " failed: " + text + " (reported to " + who() +
                    " while it waited for " + waiting_for() + ")"));
    peer_failed = true;
    std::rethrow_exception(refusal);
  }

  /// Polls @p done until it says yes; throws for a failure notice or after the timeout. Every wait
  /// of the transport goes through here: nothing blocks without a bound.
  void wait(const std::function<bool()>& done, const std::function<std::string()>& waiting_for) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout);
    for (int polls = 0;; ++polls) {
      if (done()) return;
      check_notices(waiting_for);
      if (std::chrono::steady_clock::now() > deadline) {
        abandon();
        refusal = std::make_exception_ptr(transport_timeout(
            "soaheap: MpiTransport " + who() + " waited " + seconds_text(timeout) + " s for " + waiting_for() +
            " and gave up (the bound is MpiTransportOptions::timeout_seconds or SOAHEAP_MPI_TIMEOUT): that rank is "
            "stuck, finished, or making other calls"));
        std::rethrow_exception(refusal);
      }
      if (polls >= kPollsBeforeSleeping) std::this_thread::sleep_for(kPollSleep);
    }
  }

  /// Tests every request of @p requests; true when all are complete. A failed request throws.
  static bool all_complete(std::vector<MPI_Request>& requests, const char* what) {
    bool all = true;
    for (MPI_Request& request : requests) {
      if (request == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Status status;
      const int result = MPI_Test(&request, &done, &status);
      if (result != MPI_SUCCESS) throw error(std::string("soaheap: MpiTransport: ") + what + " failed: " + mpi_message(result));
      if (!done) all = false;
    }
    return all;
  }

  /// One round of headers: row p of @p rows (width values; row 0 for all when @p same_row_for_all)
  /// to each other rank p, and theirs into row p of @p received (this rank's row untouched). Different calls on different ranks are refused.
  void exchange_headers(Operation operation, const std::uint64_t* rows, std::uint64_t* received, int width,
                        bool same_row_for_all) {
    refuse_if_broken();
    const std::uint64_t sequence = ++calls;
    const auto n = static_cast<std::size_t>(size);
    const auto w = static_cast<std::size_t>(width);
    header_out.resize(n);
    header_in.assign(n, {});
    sending.clear();
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      std::vector<std::uint64_t>& out = header_out[static_cast<std::size_t>(p)];
      out.assign({kHeaderMagic, operation, sequence, static_cast<std::uint64_t>(width)});
      const std::uint64_t* row = same_row_for_all ? rows : rows + static_cast<std::size_t>(p) * w;
      out.insert(out.end(), row, row + w);
      sending.emplace_back();
      check_mpi(MPI_Isend(out.data(), static_cast<int>(out.size()), MPI_UINT64_T, p, kHeaderTag, comm, &sending.back()),
                "MPI_Isend (header)");
    }
    std::vector<bool> arrived(n, false);
    arrived[static_cast<std::size_t>(rank)] = true;
    const auto missing = [&] {
      std::string list;
      for (std::size_t p = 0; p < n; ++p)
        if (!arrived[p]) list += (list.empty() ? "" : ", ") + std::to_string(p);
      return std::string(operation_name(operation)) + " #" + std::to_string(sequence) + " of rank(s) " +
             (list.empty() ? std::string("(all arrived; sends to complete)") : list);
    };
    wait(
        [&] {
          for (int p = 0; p < size; ++p) {
            if (arrived[static_cast<std::size_t>(p)]) continue;
            int found = 0;
            MPI_Message message;
            MPI_Status status;
            check_mpi(MPI_Improbe(p, kHeaderTag, comm, &found, &message, &status), "MPI_Improbe (header)");
            if (!found) continue;
            int words = 0;
            MPI_Get_count(&status, MPI_UINT64_T, &words);
            std::vector<std::uint64_t>& in = header_in[static_cast<std::size_t>(p)];
            in.resize(static_cast<std::size_t>(words > 0 ? words : 0));
            check_mpi(MPI_Mrecv(in.data(), words, MPI_UINT64_T, &message, MPI_STATUS_IGNORE), "MPI_Mrecv (header)");
            arrived[static_cast<std::size_t>(p)] = true;
          }
          return std::all_of(arrived.begin(), arrived.end(), [](bool a) { return a; }) &&
                 all_complete(sending, "MPI_Isend (header)");
        },
        missing);
    sending.clear();
    // Every rank sees every other's header, so a disagreement is refused on all ranks alike.
    std::string disagreement;
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      const std::vector<std::uint64_t>& in = header_in[static_cast<std::size_t>(p)];
      if (in.size() < kHeaderWords || in[0] != kHeaderMagic) {
        disagreement = "rank " + std::to_string(p) + " sent something that is no soaheap header";
      } else if (in[1] != operation || in[2] != sequence || in[3] != static_cast<std::uint64_t>(width) ||
                 in.size() != kHeaderWords + w) {
        disagreement = "rank " + std::to_string(p) + " made " + operation_name(in[1]) + " #" + std::to_string(in[2]) +
                       " of " + std::to_string(in[3]) + " values per rank while " + who() + " made " +
                       operation_name(operation) + " #" + std::to_string(sequence) + " of " + std::to_string(width);
      } else {
        std::copy(in.begin() + kHeaderWords, in.end(), received + static_cast<std::size_t>(p) * w);
        continue;
      }
      break;
    }
    if (!disagreement.empty()) {
      refusal = std::make_exception_ptr(
          usage_error("soaheap: MpiTransport: the ranks' collective calls disagree: " + disagreement +
                      " (every rank must make the same calls in the same order)"));
      std::rethrow_exception(refusal);
    }
  }
};

MpiTransport::MpiTransport(const MpiSession& mpi, Backend backend, MpiTransportOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->rank = mpi.rank();
  impl_->size = mpi.size();
  impl_->backend = backend;
  impl_->timeout = timeout_from(options);
  impl_->uncaught_at_construction = std::uncaught_exceptions();
  if (backend == Backend::cuda) {
#if SOAHEAP_MPI_WITH_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      (void)cudaGetLastError();
      throw invalid_argument("soaheap: MpiTransport on the cuda backend needs a CUDA GPU, and rank " +
                             std::to_string(mpi.rank()) + " sees none (processes without a GPU run --backend host)");
    }
    // Several processes may share a GPU: each takes local rank % GPUs.
    impl_->device = mpi.local_rank() % devices;
    check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice");
    impl_->device_pointers = options.device_data == MpiDeviceData::device ||
                             (options.device_data == MpiDeviceData::automatic && mpi_reports_cuda_support());
#else
    throw invalid_argument("soaheap: MpiTransport on the cuda backend: this build has no CUDA (configure with CUDA)");
#endif
  }
  // A communicator of its own: its tags and failure notices never meet the program's messages.
  // MPI_Comm_idup so that even this first collective waits with a bound.
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Comm_idup(MPI_COMM_WORLD, &impl_->comm, &request), "MPI_Comm_idup");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(impl_->timeout);
  for (int polls = 0;; ++polls) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test (MPI_Comm_idup)");
    if (done) break;
    if (std::chrono::steady_clock::now() > deadline)
      throw transport_timeout("soaheap: MpiTransport " + impl_->who() + " waited " + seconds_text(impl_->timeout) +
                              " s for every process to create its MpiTransport (MPI_Comm_idup) and gave up");
    if (polls >= kPollsBeforeSleeping) std::this_thread::sleep_for(kPollSleep);
  }
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
}

MpiTransport::~MpiTransport() {
  if (std::uncaught_exceptions() > impl_->uncaught_at_construction)
    report_failure("an exception ended its work (its MpiTransport was destroyed while the exception unwound)");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  impl_->abandon();
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

int MpiTransport::rank() const { return impl_->rank; }
int MpiTransport::size() const { return impl_->size; }
int MpiTransport::device() const { return impl_->device; }
bool MpiTransport::device_pointers() const { return impl_->device_pointers; }
double MpiTransport::timeout_seconds() const { return impl_->timeout; }

void MpiTransport::exchange_counts(const std::uint64_t* send, std::uint64_t* received) {
  exchange_count_rows(send, received, 1);
}

void MpiTransport::exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) {
  if (width < 1) throw invalid_argument("soaheap: exchange_count_rows: width " + std::to_string(width) + " < 1");
  impl_->exchange_headers(kCounts, send, received, width, false);
  const auto w = static_cast<std::size_t>(width);
  const auto own = static_cast<std::size_t>(impl_->rank) * w;
  std::copy(send + own, send + own + w, received + own);
}

void MpiTransport::all_reduce_sum(std::uint64_t* values, int count) {
  if (count < 1) return;
  const auto n = static_cast<std::size_t>(impl_->size);
  const auto c = static_cast<std::size_t>(count);
  std::vector<std::uint64_t> rows(n * c, 0);
  impl_->exchange_headers(kSum, values, rows.data(), count, true);
  // Integer sums: the order of the terms does not change the result, so every rank has the same.
  for (std::size_t p = 0; p < n; ++p) {
    if (p == static_cast<std::size_t>(impl_->rank)) continue;
    for (std::size_t i = 0; i < c; ++i) values[i] += rows[p * c + i];
  }
}

void MpiTransport::exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) {
  Impl& impl = *impl_;
  impl.refuse_if_broken();
  const std::uint64_t sequence = ++impl.calls;
  const auto check_peer = [&](const Message& message, const char* what) {
    if (message.peer < 0 || message.peer >= impl.size || message.peer == impl.rank)
      throw invalid_argument("soaheap: " + std::string(what) + " of " + impl.who() + " names peer " +
                             std::to_string(message.peer) + ", not another rank");
  };
  for (const Message& message : sends) check_peer(message, "send");
  for (const Message& message : receives) check_peer(message, "receive");

  // Where MPI reads and writes: the messages themselves, or their staged copies in pinned memory.
  std::vector<unsigned char*> send_at, receive_at;
  bool staged = false;
#if SOAHEAP_MPI_WITH_CUDA
  staged = impl.backend == Backend::cuda && !impl.device_pointers;
  if (staged) {
    std::uint64_t send_total = 0, receive_total = 0;
    for (const Message& message : sends) send_total += message.bytes;
    for (const Message& message : receives) receive_total += message.bytes;
    unsigned char* out = impl.send_stage.ensure(send_total);
    unsigned char* in = impl.receive_stage.ensure(receive_total);
    for (const Message& message : sends) {
      if (message.bytes > 0) check_cuda(cudaMemcpy(out, message.data, message.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (stage a send)");
      send_at.push_back(out);
      out += message.bytes;
    }
    for (const Message& message : receives) {
      receive_at.push_back(in);
      in += message.bytes;
    }
  }
#endif
  if (!staged) {
    for (const Message& message : sends) send_at.push_back(static_cast<unsigned char*>(message.data));
    for (const Message& message : receives) receive_at.push_back(static_cast<unsigned char*>(message.data));
  }

  // Pieces of at most kLargestPiece bytes; a message's pieces go in order under one tag.
  struct Piece {
    int message;
    std::uint64_t bytes;
  };
  std::vector<Piece> receive_pieces;
  impl.receiving.clear();
  impl.sending.clear();
  for (std::size_t m = 0; m < receives.size(); ++m) {
    for (std::uint64_t offset = 0; offset < receives[m].bytes; offset += kLargestPiece) {
      const std::uint64_t bytes = std::min(kLargestPiece, receives[m].bytes - offset);
      impl.receiving.emplace_back();
      receive_pieces.push_back({static_cast<int>(m), bytes});
      check_mpi(MPI_Irecv(receive_at[m] + offset, static_cast<int>(bytes), MPI_BYTE, receives[m].peer, kDataTag, impl.comm,
                          &impl.receiving.back()),
                "MPI_Irecv");
    }
  }
  for (std::size_t m = 0; m < sends.size(); ++m) {
    for (std::uint64_t offset = 0; offset < sends[m].bytes; offset += kLargestPiece) {
      const std::uint64_t bytes = std::min(kLargestPiece, sends[m].bytes - offset);
      impl.sending.emplace_back();
      check_mpi(MPI_Isend(send_at[m] + offset, static_cast<int>(bytes), MPI_BYTE, sends[m].peer, kDataTag, impl.comm,
                          &impl.sending.back()),
                "MPI_Isend");
    }
  }

  // Each receive's status says how much arrived: a sender that posted another size is reported.
  std::string problem;
  std::vector<bool> received(impl.receiving.size(), false);
  const auto pending = [&] {
    std::string list;
    for (std::size_t i = 0; i < received.size(); ++i)
      if (!received[i]) list += (list.empty() ? "" : ", ") + std::to_string(receives[static_cast<std::size_t>(receive_pieces[i].message)].peer);
    return "exchange #" + std::to_string(sequence) + ": " +
           (list.empty() ? std::string("its sends to complete") : "messages from rank(s) " + list);
  };
  impl.wait(
      [&] {
        for (std::size_t i = 0; i < impl.receiving.size(); ++i) {
          if (received[i]) continue;
          int done = 0;
          MPI_Status status;
          const int result = MPI_Test(&impl.receiving[i], &done, &status);
          const Message& message = receives[static_cast<std::size_t>(receive_pieces[i].message)];
          // MPI_Test returns a receive's error itself (status.MPI_ERROR is set only by the calls
          // that complete several requests); the communicator returns errors instead of aborting.
          if (result != MPI_SUCCESS) {
            const int code = result;
            int error_class = 0;
            MPI_Error_class(code, &error_class);
            if (problem.empty())
              problem = error_class == MPI_ERR_TRUNCATE
                            ? impl.who() + " expects " + std::to_string(message.bytes) + " bytes from rank " +
                                  std::to_string(message.peer) + ", which sent more"
                            : "receiving from rank " + std::to_string(message.peer) + " failed: " + mpi_message(code);
            impl.receiving[i] = MPI_REQUEST_NULL;
            received[i] = true;
            continue;
          }
          if (!done) continue;
          received[i] = true;
          int arrived = 0;
          MPI_Get_count(&status, MPI_BYTE, &arrived);
          if (static_cast<std::uint64_t>(arrived) != receive_pieces[i].bytes && problem.empty())
            problem = impl.who() + " expects " + std::to_string(message.bytes) + " bytes from rank " +
                      std::to_string(message.peer) + ", which sent fewer";
        }
        return std::all_of(received.begin(), received.end(), [](bool r) { return r; }) &&
               Impl::all_complete(impl.sending, "MPI_Isend");
      },
      pending);
  impl.receiving.clear();
  impl.sending.clear();
  if (!problem.empty()) throw usage_error("soaheap: MpiTransport exchange #" + std::to_string(sequence) + ": " + problem);
#if SOAHEAP_MPI_WITH_CUDA
  if (staged)
    for (std::size_t m = 0; m < receives.size(); ++m)
      if (receives[m].bytes > 0)
        check_cuda(cudaMemcpy(receives[m].data, receive_at[m], receives[m].bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy (unstage a receive)");
#endif
}

void MpiTransport::report_failure(const std::string& what) noexcept {
  Impl& impl = *impl_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A failure another rank reported has reached every rank from its origin already.
  if (finalized || impl.peer_failed || !impl.notice.empty()) return;
  try {
    impl.abandon();
    impl.notice = what.substr(0, kLongestNotice);
    std::vector<MPI_Request> notices;
    for (int p = 0; p < impl.size; ++p) {
      if (p == impl.rank) continue;
      notices.emplace_back();
      if (MPI_Isend(impl.notice.data(), static_cast<int>(impl.notice.size()), MPI_CHAR, p, kFailureTag, impl.comm,
                    &notices.back()) != MPI_SUCCESS)
        notices.back() = MPI_REQUEST_NULL;
    }
    // The notices are small (sent eagerly); a peer that never receives them must not hold us.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(impl.timeout);
    for (int polls = 0;; ++polls) {
      int done = 0;
      if (MPI_Testall(static_cast<int>(notices.size()), notices.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS || done)
        break;
      if (std::chrono::steady_clock::now() > deadline) break;
      if (polls >= kPollsBeforeSleeping) std::this_thread::sleep_for(kPollSleep);
    }
    for (MPI_Request& request : notices)
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    if (!impl.refusal)
      impl.refusal = std::make_exception_ptr(usage_error("soaheap: MpiTransport " + impl.who() +
                                                         " reported its own failure and makes no more calls: " + impl.notice));
  } catch (...) {
    // report_failure runs while something else failed already; it must not add a second exception.
  }
}

}  // namespace soaheap::distributed
