#pragma once
/// @file profiler.hpp
/// @brief `soaheap::Profiler`: records a heap's per-class occupancy over time and every
///        defragmentation run to a JSON Lines file (format: tools/profile/FORMAT.md, version 1),
///        which `soaheap-profile` summarizes, compares and plots.
///
/// Host-only code; one `heap.stats()` call (a device reduction) per recorded sample. Every line is
/// flushed as soon as it is written, so that a run that dies still leaves a readable file.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/stats.hpp>
#include <soaheap/defrag/defrag_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace soaheap {

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
  Profiler(const std::string& path, std::string application, int sampling_interval = 1)
      : path_(path), application_(std::move(application)), sampling_interval_(sampling_interval),
        start_(std::chrono::steady_clock::now()) {
    if (sampling_interval < 1)
      throw invalid_argument("soaheap: profiler sampling interval " + std::to_string(sampling_interval) +
                             " is invalid: it must be at least 1");
    out_.open(path, std::ios::out | std::ios::trunc);
    if (!out_) throw error("soaheap: cannot open profile file '" + path + "' for writing");
  }

  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  const std::string& path() const { return path_; }
  int sampling_interval() const { return sampling_interval_; }

  /// @brief A class as the profile's header lists it.
  struct ProfiledClass {
    std::string name;
    int capacity = 0;  ///< 0 for an abstract class
    bool abstract = false;
  };

  /// @brief Writes the header line: application, backend, device, heap and block sizes, classes.
  /// @param config free-form settings of the run (defrag factor, policy, ...), recorded as is
  template <class Heap>
  void attach(const Heap& heap, const nlohmann::json& config = nlohmann::json::object()) {
    std::vector<ProfiledClass> classes;
    for (int c = 0; c < Heap::kClassCount; ++c) {
      const bool abstract = Heap::class_is_abstract(c);
      classes.push_back({Heap::class_name(c), abstract ? 0 : Heap::capacity_of_class(c), abstract});
    }
    attach(heap.backend(), describe_device(heap.backend(), heap.host_threads()), heap.heap_bytes(),
           heap.block_bytes(), classes, config);
  }

  /// @brief attach() for a heap known by its figures (a host-compiled harness that sees no heap type).
  void attach(Backend backend, const std::string& device, std::uint64_t heap_bytes, std::uint64_t block_bytes,
              const std::vector<ProfiledClass>& classes, const nlohmann::json& config = nlohmann::json::object()) {
    if (attached_) throw usage_error("soaheap: Profiler::attach called twice for '" + path_ + "'");
    nlohmann::json header;
    header["format"] = kFormatName;
    header["version"] = kFormatVersion;
    header["application"] = application_;
    header["backend"] = std::string(to_string(backend));
    header["device"] = device;
    header["heap_bytes"] = heap_bytes;
    header["block_bytes"] = block_bytes;
    nlohmann::json listed = nlohmann::json::array();
    for (std::size_t c = 0; c < classes.size(); ++c)
      listed.push_back({{"id", c},
                        {"name", classes[c].name},
                        {"capacity", classes[c].abstract ? 0 : classes[c].capacity},
                        {"abstract", classes[c].abstract}});
    header["classes"] = std::move(listed);
    header["config"] = config.is_object() ? config : nlohmann::json::object({{"value", config}});
    write_line(header);
    attached_ = true;
  }

  /// @brief Records the heap's statistics at @p iteration, if it falls on the sampling interval.
  template <class Heap>
  void sample(const Heap& heap, long long iteration) {
    if (iteration % sampling_interval_ != 0) return;
    sample_stats(heap.stats(), iteration);
  }

  /// @brief Records already computed statistics (when the caller took them anyway).
  void sample_stats(const HeapStats& stats, long long iteration) {
    require_attached("sample");
    nlohmann::json classes = nlohmann::json::object();
    for (const ClassStats& entry : stats.classes) {
      if (entry.abstract) continue;
      classes[entry.name] = {{"used_slots", entry.used_slots},
                             {"allocated_slots", entry.allocated_slots()},
                             {"allocated_blocks", entry.allocated_blocks},
                             {"fragmentation", entry.fragmentation()},
                             {"active_blocks", entry.active_blocks},
                             {"candidate_blocks", entry.candidate_blocks}};
    }
    nlohmann::json record = {{"type", "sample"}, {"iteration", non_negative(iteration)}, {"time_s", elapsed_s()},
                             {"classes", std::move(classes)}};
    // Only programs that use soaheap::malloc get the key, so older readers of theirs keep working.
    if (stats.untyped.blocks() != 0 || stats.untyped.allocations_total != 0)
      record["untyped"] = {{"blocks", stats.untyped.blocks()},
                           {"live_allocations", stats.untyped.live_allocations()},
                           {"bytes_reserved", stats.untyped.bytes_reserved()}};
    write_line(record);
  }

  /// @brief Records one defragmentation run that just finished at @p iteration.
  void record_defrag(long long iteration, const DefragResult& result) {
    require_attached("record_defrag");
    const double total_ms = finite_non_negative(result.times.total_ms());
    // time_s is when the run began: it has just ended, after total_ms.
    const double began_s = std::max(0.0, elapsed_s() - total_ms / 1000.0);
    write_line({{"type", "defrag"},
                {"iteration", non_negative(iteration)},
                {"time_s", began_s},
                {"class", result.class_name},
                {"passes", result.passes < 0 ? 0 : result.passes},
                {"blocks_freed", result.blocks_freed},
                {"objects_moved", result.objects_moved},
                {"fragmentation_before", fraction(result.fragmentation_before)},
                {"fragmentation_after", fraction(result.fragmentation_after)},
                {"ms",
                 {{"scan", finite_non_negative(result.times.scan_ms)},
                  {"copy", finite_non_negative(result.times.copy_ms)},
                  {"forward", finite_non_negative(result.times.forward_ms)},
                  {"rewrite", finite_non_negative(result.times.rewrite_ms)},
                  {"state", finite_non_negative(result.times.state_ms)},
                  {"order", finite_non_negative(result.times.order_ms)},
                  {"total", total_ms}}}});
  }

  /// @brief Writes the end line; nothing may be recorded afterwards.
  void finish(long long iterations, double total_time_s, double defrag_time_s) {
    require_attached("finish");
    write_line({{"type", "end"},
                {"iterations", non_negative(iterations)},
                {"total_time_s", finite_non_negative(total_time_s)},
                {"defrag_time_s", finite_non_negative(defrag_time_s)}});
    finished_ = true;
    out_.close();
  }

  /// @brief Seconds since the profiler was created (the time axis of the file).
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  static long long non_negative(long long value) { return value < 0 ? 0 : value; }
  static double finite_non_negative(double value) { return std::isfinite(value) && value > 0 ? value : 0.0; }
  static double fraction(double value) {
    if (!std::isfinite(value) || value < 0) return 0.0;
    return value > 1 ? 1.0 : value;
  }

  void require_attached(const char* what) const {
    if (!attached_) throw usage_error(std::string("soaheap: Profiler::") + what + " before attach() for '" + path_ + "'");
    if (finished_) throw usage_error(std::string("soaheap: Profiler::") + what + " after finish() for '" + path_ + "'");
  }

  void write_line(const nlohmann::json& record) {
    // nlohmann writes doubles with round-trip precision (17 significant digits).
    out_ << record.dump() << '\n';
    out_.flush();
    if (!out_) throw error("soaheap: writing profile file '" + path_ + "' failed");
  }

  std::string path_;
  std::string application_;
  int sampling_interval_;
  std::chrono::steady_clock::time_point start_;
  std::ofstream out_;
  bool attached_ = false;
  bool finished_ = false;
};

}  // namespace soaheap
