#pragma once
/// @file
/// @brief Configuration of heap defragmentation: the defragmentation factor n,
///        the retained candidates k1, the policy that decides when to
///        defragment (every m iterations, or after k2 candidates appear), and
///        per-class overrides; read from TOML/JSON files, environment
///        variables and command-line policy specs, and validated against the
///        classes a heap manages.
///
/// This header is plain C++ (structs and declarations only) so that every
/// translation unit can include it, CUDA sources compiled by nvcc included.
/// The readers are compiled once, by the C++ compiler, into the
/// `soaheap::config` library (config/src/), which is the only code that sees
/// toml++ and nlohmann-json; TOML therefore works in every application.
///
/// Sources are layered: defaults, then a file, then the environment (see
/// load_defrag_config()). Every rejected input raises soaheap::config_error
/// whose message names the key or environment variable, the bad value and,
/// for files, the file and position. docs/defrag-config.md describes every key.

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace soaheap {

// ===========================================================================
// Model

/// @brief When defragmentation is started (paper, section "Defragmentation
///        Frequency").
enum class DefragPolicyKind {
  manual,  ///< only when the program calls soaheap::defragment<T>() itself
  every,   ///< every m iterations (DefragConfig::every)
  mass,    ///< once at least k2 candidates exist (DefragConfig::mass_threshold)
  automatic,  ///< "auto": when the memory it frees is worth its measured cost, within DefragConfig::auto_budget
};

/// @brief Per-class overrides; an empty optional falls back to the global
///        value in DefragConfig.
struct DefragClassSettings {
  /// n for this class: a block is a merge candidate when at most n/(n+1) full.
  /// Valid range 1 .. capacity-1 of the class.
  std::optional<int> factor;
  /// k1 for this class: passes stop once no more than this many candidates
  /// remain. >= 0.
  std::optional<long long> retained_candidates;
  /// Fewest source blocks a pass must have to be worth launching. >= 1.
  std::optional<long long> min_compactions;
  /// Locality window for this class, in blocks (see DefragConfig::locality_window). >= 0.
  std::optional<long long> locality_window;
  /// Order of this class's objects when the policies compact it (ordered compaction): "none", or
  /// the name of an order the application defined for the class ("field:position", "key:morton";
  /// DefragPolicy::define_order). Unset: the application's default order of the class, if any.
  std::optional<std::string> order;
};

/// @brief k2, the candidate count that triggers the `mass` policy.
///
/// Either an absolute number of candidate blocks (`value` = 5000) or a
/// percentage of all blocks of the heap (`value` = 2.5, `is_percent` = true,
/// 0 < value <= 100). `value == 0` means "not set".
struct MassThreshold {
  double value = 0;
  bool is_percent = false;

  /// @brief Whether a threshold was given.
  bool is_set() const noexcept { return value > 0; }

  /// @brief The threshold as a number of blocks for a heap of
  ///        @p heap_blocks blocks. A percentage rounds up, so a non-zero
  ///        percentage never becomes a threshold of 0 that would fire always.
  long long candidate_count(long long heap_blocks) const {
    if (!is_percent) return static_cast<long long>(value);
    return static_cast<long long>(std::ceil(value * static_cast<double>(heap_blocks) / 100.0));
  }
};

/// @brief Complete defragmentation configuration of one heap.
struct DefragConfig {
  DefragPolicyKind policy = DefragPolicyKind::manual;
  int factor = 1;                                      ///< n, defragmentation (merge) factor
  long long retained_candidates = 0;                   ///< k1, candidates left in place when passes stop
  long long min_compactions = 1;                       ///< fewest source blocks that make a pass worth running
  MassThreshold mass_threshold{};                      ///< k2, required when policy == mass
  long long every = 0;                                 ///< m, required (> 0) when policy == every
  double auto_budget = 0.02;                           ///< policy auto: most share of the runtime spent defragmenting
  /// Locality-preserving placement: 0 (default) compacts each class as a whole; W > 0 compacts each
  /// window of W consecutive block ids on its own, so a moved object stays near its old address
  /// (DefragOptions::locality_window; the plan compaction strategy, which the policies use).
  long long locality_window = 0;
  std::optional<bool> release_memory;  ///< give the memory of free blocks at the heap's end back after the policy's compactions (a growable heap: HeapOptions::max_bytes); unset = on for policy auto, off otherwise
  /// A policy's ordered compaction on a growable heap maps the fresh blocks it gathers a class into
  /// when the heap has too few free ones (DefragOptions::map_fresh_blocks): objects stay in their
  /// order at the price of that memory. Off (default): such a run compacts the class in place.
  bool map_fresh_blocks = false;
  std::map<std::string, DefragClassSettings> classes;  ///< per-class overrides by class name

  /// @brief Whether the policy gives memory back after compacting: release_memory, else on for policy auto only.
  bool releases_memory() const { return release_memory.value_or(policy == DefragPolicyKind::automatic); }

  /// @brief n for @p class_name: its override, else the global factor.
  int factor_for(const std::string& class_name) const {
    const DefragClassSettings* settings = settings_for(class_name);
    return settings && settings->factor ? *settings->factor : factor;
  }
  /// @brief k1 for @p class_name: its override, else the global value.
  long long retained_candidates_for(const std::string& class_name) const {
    const DefragClassSettings* settings = settings_for(class_name);
    return settings && settings->retained_candidates ? *settings->retained_candidates : retained_candidates;
  }
  /// @brief Minimum compactions for @p class_name: its override, else the
  ///        global value.
  long long min_compactions_for(const std::string& class_name) const {
    const DefragClassSettings* settings = settings_for(class_name);
    return settings && settings->min_compactions ? *settings->min_compactions : min_compactions;
  }
  /// @brief Locality window (blocks) for @p class_name: its override, else the global value.
  long long locality_window_for(const std::string& class_name) const {
    const DefragClassSettings* settings = settings_for(class_name);
    return settings && settings->locality_window ? *settings->locality_window : locality_window;
  }
  /// @brief The order configured for @p class_name ("none", "field:NAME", "key:NAME"), or empty
  ///        when the configuration leaves it to the application.
  std::optional<std::string> order_for(const std::string& class_name) const {
    const DefragClassSettings* settings = settings_for(class_name);
    return settings ? settings->order : std::nullopt;
  }

 private:
  const DefragClassSettings* settings_for(const std::string& class_name) const {
    const auto found = classes.find(class_name);
    return found == classes.end() ? nullptr : &found->second;
  }
};

/// @brief What the heap knows about one managed class; supplied by the caller
///        so that settings can be checked against real block capacities.
struct ClassInfo {
  std::string name;  ///< human-readable class name, as used in files and messages
  int capacity;      ///< objects per block, N_T (1..64)
};

/// @brief Raised for every invalid configuration input: unreadable or
///        malformed file, unknown key, wrong type, out-of-range value,
///        inconsistent settings, bad environment variable or policy spec.
///
/// what() is a complete, human-readable sentence; key() gives the offending
/// key for programs that want to point at it.
class config_error : public std::runtime_error {
 public:
  explicit config_error(const std::string& message, std::string key = {})
      : std::runtime_error(message), key_(std::move(key)) {}

  /// @brief The offending key as a dotted path ("defrag.classes.Fish.factor"),
  ///        environment variable name or "policy spec"; empty when the problem
  ///        is not one key (unreadable file, syntax error).
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

/// @brief Names of the environment variables read by
///        apply_defrag_env_overrides().
namespace defrag_env {
inline constexpr const char policy[] = "SOAHEAP_DEFRAG_POLICY";
inline constexpr const char factor[] = "SOAHEAP_DEFRAG_FACTOR";
inline constexpr const char retained_candidates[] = "SOAHEAP_DEFRAG_RETAINED";
inline constexpr const char min_compactions[] = "SOAHEAP_DEFRAG_MIN_COMPACTIONS";
inline constexpr const char every[] = "SOAHEAP_DEFRAG_EVERY";
inline constexpr const char mass_threshold[] = "SOAHEAP_DEFRAG_MASS_THRESHOLD";
inline constexpr const char auto_budget[] = "SOAHEAP_DEFRAG_AUTO_BUDGET";
inline constexpr const char locality_window[] = "SOAHEAP_DEFRAG_LOCALITY_WINDOW";
inline constexpr const char release_memory[] = "SOAHEAP_DEFRAG_RELEASE_MEMORY";
inline constexpr const char map_fresh_blocks[] = "SOAHEAP_DEFRAG_MAP_FRESH_BLOCKS";
/// Per-class variables are these prefixes followed by the class name in upper
/// case, with every character other than A-Z and 0-9 replaced by '_'.
inline constexpr const char class_factor_prefix[] = "SOAHEAP_DEFRAG_FACTOR_";
inline constexpr const char class_retained_candidates_prefix[] = "SOAHEAP_DEFRAG_RETAINED_";
inline constexpr const char class_min_compactions_prefix[] = "SOAHEAP_DEFRAG_MIN_COMPACTIONS_";
inline constexpr const char class_locality_window_prefix[] = "SOAHEAP_DEFRAG_LOCALITY_WINDOW_";
inline constexpr const char class_order_prefix[] = "SOAHEAP_DEFRAG_ORDER_";
}  // namespace defrag_env

// ===========================================================================
// API

/// @brief Reads a policy name: "manual", "every" or "mass".
/// @throw config_error for any other text, listing the valid names.
DefragPolicyKind parse_policy_kind(std::string_view name);

/// @brief Whether @p order is a valid order setting: "none", "field:NAME" or "key:NAME" with NAME a
///        C identifier (DefragClassSettings::order).
bool is_valid_order_name(std::string_view order);

/// @brief The name of @p policy as accepted by parse_policy_kind().
std::string_view to_string(DefragPolicyKind policy);

/// @brief Applies a command-line policy spec as used by the examples:
///        "none" (or "manual"), "every:M", "mass:K2" or "mass:P%".
///
/// Changes only the policy and the parameter the spec names; other settings
/// (n, k1, per-class values) are kept.
/// @throw config_error naming the spec when it is malformed or out of range.
void apply_policy_spec(DefragConfig& config, std::string_view spec);

/// @brief Parses a JSON configuration document; same schema and checks as
///        parse_defrag_config_toml(). Duplicate keys are rejected.
/// @throw config_error on a syntax error (with line and column) or any
///        invalid setting (with key and value).
DefragConfig parse_defrag_config_json(std::string_view text, const std::vector<ClassInfo>& classes,
                                      std::string_view source_name = "<string>");

/// @brief Overrides @p config with the SOAHEAP_DEFRAG_* environment variables
///        that are set (see namespace defrag_env and docs/defrag-config.md).
///
/// A variable that is set but empty is an error, not "unset". Values are
/// checked as they are read, and factors coming from the environment are
/// checked against the class capacities.
/// @param getenv_fn lookup used instead of std::getenv, so that tests and
///        embedding programs can supply variables without touching the process
///        environment.
/// @throw config_error naming the variable and its value.
void apply_defrag_env_overrides(DefragConfig& config, const std::vector<ClassInfo>& classes,
                                const std::function<const char*(const char*)>& getenv_fn = std::getenv);

/// @brief Checks a complete configuration against the classes of a heap.
///
/// Rejects: an order that is not "none", "field:NAME" or "key:NAME" (NAME a C identifier); n < 1; an effective n that is not below a class's capacity (the
/// global n is checked against every class that uses it; a class of capacity
/// 1 cannot be defragmented and is only an error when given its own factor);
/// negative or zero counts where they are meaningless (a negative locality
/// window included); per-class settings for
/// unknown classes; policy `every` without m >= 1; policy `mass` without k2;
/// a percentage k2 outside (0, 100].
/// @throw config_error naming the first offending key and value.
void validate(const DefragConfig& config, const std::vector<ClassInfo>& classes);

/// @brief Parses a TOML configuration document.
///
/// Checks every key, type and range, that class tables name managed classes,
/// and that each class's effective factor fits its capacity. Requirements
/// that span sources (policy `every` needs m, `mass` needs k2, which the
/// environment may still supply) are left to validate().
/// @param source_name shown in error messages in place of a file name.
/// @throw config_error on a syntax error (with line and column) or any
///        invalid setting (with key, value, line and column).
DefragConfig parse_defrag_config_toml(std::string_view text, const std::vector<ClassInfo>& classes,
                                      std::string_view source_name = "<string>");

/// @brief Reads a configuration file, choosing the format by its extension
///        (".toml" or ".json", any letter case).
/// @throw config_error for another extension, an unreadable file, or any
///        error parse_defrag_config_toml() / parse_defrag_config_json() raise.
DefragConfig load_defrag_config_file(const std::string& path, const std::vector<ClassInfo>& classes);

/// @brief The usual way to configure a heap: defaults, then the file at
///        @p path (if given), then the environment, then validate().
/// @param getenv_fn as for apply_defrag_env_overrides().
/// @throw config_error from any of these steps.
DefragConfig load_defrag_config(const std::optional<std::string>& path, const std::vector<ClassInfo>& classes,
                                const std::function<const char*(const char*)>& getenv_fn = std::getenv);

}  // namespace soaheap
