#pragma once
/// @file profiler.hpp
/// @brief `soaheap::Profiler`: records a heap's per-class occupancy over time and every
///        defragmentation run to a JSON Lines file (format: tools/profile/FORMAT.md, version 1),
///        which `soaheap-profile` summarizes, compares and plots.
///
/// Host-only code; one `heap.stats()` call (a device reduction) per recorded sample. Every line is
/// flushed as soon as it is written, so that a run that dies still leaves a readable file. The
/// JSON is written by the compiled library soaheap::profiler (profiler/src/profiler.cpp), so this
/// header, which every CUDA source sees through <soaheap/soaheap.cuh>, does not bring in a JSON
/// library.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/stats.hpp>
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/reflection/class_traits.cuh>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace soaheap {

template <class... Classes>
class Heap;

namespace detail {

/// Bytes of one object's fields for each class of a soaheap::Heap (0 for an abstract class), and 0
/// (unknown) for a heap type that is not a soaheap::Heap.
template <class HeapType>
struct ProfiledObjectBytes {
  static std::uint64_t of(int) { return 0; }
};
template <class... Classes>
struct ProfiledObjectBytes<Heap<Classes...>> {
  static std::uint64_t of(int class_index) {
    static constexpr std::uint64_t kBytes[] = {(Classes::kAbstract ? std::uint64_t{0} : object_size_v<Classes>)...};
    return class_index >= 0 && class_index < static_cast<int>(sizeof...(Classes)) ? kBytes[class_index] : 0;
  }
};

}  // namespace detail

/// @brief Writes a soaheap profile file (JSON Lines, format version 1).
///
/// Usage: construct, `attach(heap)` once (writes the header), `sample(heap, i)` after each
/// iteration, `record_defrag(i, result)` after each defragmentation run, `finish(...)` at the end.
class Profiler {
 public:
  static constexpr int kFormatVersion = 1;
  static constexpr const char* kFormatName = "soaheap-profile";

  /// @param path file to create (truncated if it exists)
  /// @param application program name recorded in the header
  /// @param sampling_interval record a sample only at iterations that are multiples of this (>= 1)
  /// @throw invalid_argument for a sampling interval below 1; error when the file cannot be opened
  Profiler(const std::string& path, std::string application, int sampling_interval = 1);

  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  const std::string& path() const { return path_; }
  int sampling_interval() const { return sampling_interval_; }

  /// @brief A class as the profile's header lists it.
  struct ProfiledClass {
    std::string name;
    int capacity = 0;  ///< 0 for an abstract class
    bool abstract = false;
    std::uint64_t object_bytes = 0;  ///< bytes of one object's fields; 0 when unknown (then not recorded)
  };

  /// @brief Writes the header line: application, backend, device, heap size (what it holds now and
  ///        the most it may grow to), block size, classes (with their object sizes).
  /// @param config_json free-form settings of the run (defrag factor, policy, ...) as JSON text,
  ///        recorded as is (a value other than an object is recorded as {"value": ...})
  /// @throw invalid_argument when @p config_json is not JSON
  template <class Heap>
  void attach(const Heap& heap, const std::string& config_json = "{}") {
    std::vector<ProfiledClass> classes;
    for (int c = 0; c < Heap::kClassCount; ++c) {
      const bool abstract = Heap::class_is_abstract(c);
      classes.push_back({Heap::class_name(c), abstract ? 0 : Heap::capacity_of_class(c), abstract,
                         detail::ProfiledObjectBytes<Heap>::of(c)});
    }
    attach(heap.backend(), describe_device(heap.backend(), heap.host_threads()), heap.heap_bytes(),
           heap.max_bytes(), heap.block_bytes(), classes, config_json);
  }

  /// @brief attach() for a heap known by its figures (a host-compiled harness that sees no heap type).
  /// @param heap_bytes bytes the heap holds now; @param max_bytes the most it may grow to (its size
  ///        when fixed)
  void attach(Backend backend, const std::string& device, std::uint64_t heap_bytes, std::uint64_t max_bytes,
              std::uint64_t block_bytes, const std::vector<ProfiledClass>& classes,
              const std::string& config_json = "{}") {
    attach_described(std::string(to_string(backend)), device, heap_bytes, max_bytes, block_bytes, classes,
                     config_json);
  }

  /// @brief attach() for a heap known by its figures, without its maximum size: the header then has
  ///        no max_bytes.
  void attach(Backend backend, const std::string& device, std::uint64_t heap_bytes, std::uint64_t block_bytes,
              const std::vector<ProfiledClass>& classes, const std::string& config_json = "{}") {
    attach_described(std::string(to_string(backend)), device, heap_bytes, 0, block_bytes, classes, config_json);
  }

  /// @brief Records the heap's statistics at @p iteration, if it falls on the sampling interval:
  ///        each class's occupancy, the heap's resident bytes and mapped blocks, untyped memory.
  template <class Heap>
  void sample(const Heap& heap, long long iteration) {
    if (iteration % sampling_interval_ != 0) return;
    sample_stats(heap.stats(), iteration);
  }

  /// @brief Records already computed statistics (when the caller took them anyway).
  void sample_stats(const HeapStats& stats, long long iteration);

  /// @brief Records one defragmentation run that just finished at @p iteration.
  void record_defrag(long long iteration, const DefragResult& result);

  /// @brief Writes the end line; nothing may be recorded afterwards.
  void finish(long long iterations, double total_time_s, double defrag_time_s);

  /// @brief Seconds since the profiler was created (the time axis of the file).
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  void attach_described(const std::string& backend, const std::string& device, std::uint64_t heap_bytes,
                        std::uint64_t max_bytes, std::uint64_t block_bytes, const std::vector<ProfiledClass>& classes,
                        const std::string& config_json);
  void require_attached(const char* what) const;
  void write_line(const std::string& line);

  std::string path_;
  std::string application_;
  int sampling_interval_;
  std::chrono::steady_clock::time_point start_;
  std::ofstream out_;
  bool attached_ = false;
  bool finished_ = false;
};

}  // namespace soaheap
