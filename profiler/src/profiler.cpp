// soaheap::Profiler's JSON writing, compiled once by the C++ compiler so that nlohmann-json stays
// out of the CUDA sources that include profiler.hpp through the umbrella header.
#include <soaheap/profiler/profiler.hpp>

#include <soaheap/core/errors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

namespace soaheap {
namespace {

long long non_negative(long long value) { return value < 0 ? 0 : value; }
double finite_non_negative(double value) { return std::isfinite(value) && value > 0 ? value : 0.0; }
double fraction(double value) {
  if (!std::isfinite(value) || value < 0) return 0.0;
  return value > 1 ? 1.0 : value;
}

}  // namespace

Profiler::Profiler(const std::string& path, std::string application, int sampling_interval)
    : path_(path), application_(std::move(application)), sampling_interval_(sampling_interval),
      start_(std::chrono::steady_clock::now()) {
  if (sampling_interval < 1)
    throw invalid_argument("soaheap: profiler sampling interval " + std::to_string(sampling_interval) +
                           " is invalid: it must be at least 1");
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_) throw error("soaheap: cannot open profile file '" + path + "' for writing");
}

void Profiler::attach_described(const std::string& backend, const std::string& device, std::uint64_t heap_bytes,
                                std::uint64_t max_bytes, std::uint64_t block_bytes,
                                const std::vector<ProfiledClass>& classes, const std::string& config_json) {
  if (attached_) throw usage_error("soaheap: Profiler::attach called twice for '" + path_ + "'");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::parse_error& bad) {
    throw invalid_argument("soaheap: Profiler::attach: the run's settings are not JSON (" + std::string(bad.what()) +
                           ")");
  }
  nlohmann::json header;
  header["format"] = kFormatName;
  header["version"] = kFormatVersion;
  header["application"] = application_;
  header["backend"] = backend;
  header["device"] = device;
  header["heap_bytes"] = heap_bytes;
  // 0: the caller did not say (attach() by figures without it); readers then know no maximum.
  if (max_bytes != 0) header["max_bytes"] = max_bytes;
  header["block_bytes"] = block_bytes;
  nlohmann::json listed = nlohmann::json::array();
  for (std::size_t c = 0; c < classes.size(); ++c) {
    nlohmann::json entry = {{"id", c},
                            {"name", classes[c].name},
                            {"capacity", classes[c].abstract ? 0 : classes[c].capacity},
                            {"abstract", classes[c].abstract}};
    if (!classes[c].abstract && classes[c].object_bytes != 0) entry["object_bytes"] = classes[c].object_bytes;
    listed.push_back(std::move(entry));
  }
  header["classes"] = std::move(listed);
  header["config"] = config.is_object() ? config : nlohmann::json::object({{"value", config}});
  write_line(header.dump());
  attached_ = true;
}

void Profiler::sample_stats(const HeapStats& stats, long long iteration) {
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
  nlohmann::json record = {{"type", "sample"},
                           {"iteration", non_negative(iteration)},
                           {"time_s", elapsed_s()},
                           {"resident_bytes", stats.resident_bytes},
                           {"mapped_blocks", stats.mapped_blocks},
                           {"classes", std::move(classes)}};
  // Only programs that use soaheap::malloc get the key, so older readers of theirs keep working.
  if (stats.untyped.blocks() != 0 || stats.untyped.allocations_total != 0)
    record["untyped"] = {{"blocks", stats.untyped.blocks()},
                         {"live_allocations", stats.untyped.live_allocations()},
                         {"bytes_reserved", stats.untyped.bytes_reserved()}};
  write_line(record.dump());
}

void Profiler::record_defrag(long long iteration, const DefragResult& result) {
  require_attached("record_defrag");
  const double total_ms = finite_non_negative(result.times.total_ms());
  // time_s is when the run began: it has just ended, after total_ms.
  const double began_s = std::max(0.0, elapsed_s() - total_ms / 1000.0);
  const nlohmann::json record = {{"type", "defrag"},
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
                                   {"total", total_ms}}}};
  write_line(record.dump());
}

void Profiler::finish(long long iterations, double total_time_s, double defrag_time_s) {
  require_attached("finish");
  const nlohmann::json record = {{"type", "end"},
                                 {"iterations", non_negative(iterations)},
                                 {"total_time_s", finite_non_negative(total_time_s)},
                                 {"defrag_time_s", finite_non_negative(defrag_time_s)}};
  write_line(record.dump());
  finished_ = true;
  out_.close();
}

void Profiler::require_attached(const char* what) const {
  if (!attached_) throw usage_error(std::string("soaheap: Profiler::") + what + " before attach() for '" + path_ + "'");
  if (finished_) throw usage_error(std::string("soaheap: Profiler::") + what + " after finish() for '" + path_ + "'");
}

void Profiler::write_line(const std::string& line) {
  // nlohmann writes doubles with round-trip precision (17 significant digits).
  out_ << line << '\n';
  out_.flush();
  if (!out_) throw error("soaheap: writing profile file '" + path_ + "' failed");
}

}  // namespace soaheap
