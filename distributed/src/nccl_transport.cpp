// NcclTransport (nccl_transport.hpp): the only file that includes nccl.h (mpi.h also in mpi_session.cpp, mpi_transport.cpp).
#include <soaheap/core/errors.hpp>
#include <soaheap/distributed/nccl_transport.hpp>

#include <cuda_runtime.h>
#include "mpi_check.hpp"

#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace soaheap::distributed {
namespace {

using detail::check_mpi;
void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  throw error(std::string("soaheap: ") + call + " failed: " + ncclGetErrorString(result) +
              " (NCCL_DEBUG=WARN says more)");
}
void check_cuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  throw error(std::string("soaheap: ") + call + " failed: " + cudaGetErrorString(result));
}

/// Device memory of at least @p bytes, kept and grown.
struct DeviceWords {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  void ensure(std::size_t wanted) {
    if (bytes >= wanted) return;
    if (pointer != nullptr) cudaFree(pointer);
    pointer = nullptr;
    check_cuda(cudaMalloc(&pointer, wanted), "cudaMalloc (NCCL transport words)");
    bytes = wanted;
  }
  ~DeviceWords() {
    if (pointer != nullptr) cudaFree(pointer);
  }
};

}  // namespace

struct NcclTransport::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  int size = 1;
  int device = 0;
  DeviceWords words;
  std::vector<std::uint64_t> host_words;

  void synchronize() { check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (NCCL stream)"); }
};

NcclTransport::NcclTransport(const MpiSession& mpi) : impl_(std::make_unique<Impl>()) {
  impl_->rank = mpi.rank();
  impl_->size = mpi.size();
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices == 0) throw error("soaheap: NcclTransport needs a CUDA GPU, and rank " + std::to_string(mpi.rank()) + " sees none");
  if (mpi.local_size() > devices)
    throw error("soaheap: " + std::to_string(mpi.local_size()) + " ranks on one host but only " + std::to_string(devices) +
                " GPUs visible: start at most one process per GPU");
  impl_->device = mpi.local_rank() % devices;
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice");
  ncclUniqueId id;
  if (impl_->rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (NCCL unique id)");
  check_cuda(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_nccl(ncclCommInitRank(&impl_->comm, impl_->size, id, impl_->rank), "ncclCommInitRank");
}

NcclTransport::~NcclTransport() {
  if (impl_->comm != nullptr) ncclCommDestroy(impl_->comm);
  if (impl_->stream != nullptr) cudaStreamDestroy(impl_->stream);
}

int NcclTransport::rank() const { return impl_->rank; }
int NcclTransport::size() const { return impl_->size; }
int NcclTransport::device() const { return impl_->device; }

void NcclTransport::exchange_counts(const std::uint64_t* send, std::uint64_t* received) {
  exchange_count_rows(send, received, 1);
}

void NcclTransport::exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) {
  if (width < 1) throw invalid_argument("soaheap: exchange_count_rows: width " + std::to_string(width) + " < 1");
  // An all-gather of every rank's rows (one round whatever the width); this rank keeps its column.
  const auto n = static_cast<std::size_t>(impl_->size);
  const auto w = static_cast<std::size_t>(width);
  const std::size_t row_words = n * w;
  impl_->words.ensure((row_words + n * row_words) * sizeof(std::uint64_t));
  auto* row = static_cast<std::uint64_t*>(impl_->words.pointer);
  std::uint64_t* matrix = row + row_words;
  check_cuda(cudaMemcpyAsync(row, send, row_words * sizeof(std::uint64_t), cudaMemcpyHostToDevice, impl_->stream),
             "cudaMemcpyAsync");
  check_nccl(ncclAllGather(row, matrix, row_words, ncclUint64, impl_->comm, impl_->stream), "ncclAllGather (counts)");
  impl_->host_words.resize(n * row_words);
  check_cuda(cudaMemcpyAsync(impl_->host_words.data(), matrix, n * row_words * sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost, impl_->stream),
             "cudaMemcpyAsync");
  impl_->synchronize();
  const auto own = static_cast<std::size_t>(impl_->rank) * w;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t k = 0; k < w; ++k) received[p * w + k] = impl_->host_words[p * row_words + own + k];
}

void NcclTransport::exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (const Message& message : sends)
    check_nccl(ncclSend(message.data, message.bytes, ncclChar, message.peer, impl_->comm, impl_->stream), "ncclSend");
  for (const Message& message : receives)
    check_nccl(ncclRecv(message.data, message.bytes, ncclChar, message.peer, impl_->comm, impl_->stream), "ncclRecv");
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  impl_->synchronize();
}

void NcclTransport::all_reduce_sum(std::uint64_t* values, int count) {
  const auto n = static_cast<std::size_t>(count);
  impl_->words.ensure(n * sizeof(std::uint64_t));
  auto* words = static_cast<std::uint64_t*>(impl_->words.pointer);
  check_cuda(cudaMemcpyAsync(words, values, n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, impl_->stream), "cudaMemcpyAsync");
  check_nccl(ncclAllReduce(words, words, n, ncclUint64, ncclSum, impl_->comm, impl_->stream), "ncclAllReduce");
  check_cuda(cudaMemcpyAsync(values, words, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, impl_->stream), "cudaMemcpyAsync");
  impl_->synchronize();
}

}  // namespace soaheap::distributed
