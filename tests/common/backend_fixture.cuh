#pragma once
// GoogleTest fixture parameterized by backend: the same test bodies run on the host backend (every
// machine, CI included) and on the cuda backend (skipped with a message when no GPU is present).

#include <soaheap/soaheap.cuh>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace soaheap_test {

class BackendTest : public ::testing::TestWithParam<soaheap::Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == soaheap::Backend::cuda && !soaheap::cuda_available())
      GTEST_SKIP() << "no CUDA GPU on this machine: the cuda-backend suite runs on a GPU machine";
  }
  soaheap::Backend backend() const { return GetParam(); }
  soaheap::HeapOptions options_for_objects(std::uint64_t objects) const {
    soaheap::HeapOptions options;
    options.objects = objects;
    options.backend = backend();
    return options;
  }
};

/// A typed array in the backend's memory (device memory for cuda), for kernels to write results to.
template <class T>
class TestBuffer {
 public:
  TestBuffer(soaheap::Backend backend, std::size_t count) : memory_(backend, count * sizeof(T)), count_(count) {
    memory_.fill_zero();
  }
  T* data() const { return memory_.as<T>(); }
  std::vector<T> to_host() const {
    std::vector<T> values(count_);
    memory_.copy_to_host(values.data(), 0, count_ * sizeof(T));
    return values;
  }
  void from_host(const std::vector<T>& values) { memory_.copy_from_host(0, values.data(), values.size() * sizeof(T)); }

 private:
  soaheap::detail::Memory memory_;
  std::size_t count_;
};

inline std::string backend_name(const ::testing::TestParamInfo<soaheap::Backend>& info) {
  return std::string(soaheap::to_string(info.param));
}

}  // namespace soaheap_test
