#pragma once
/// @file
/// @brief Configuration of heap defragmentation: the defragmentation factor n,
///        the retained candidates k1, the policy that decides when to
///        defragment (every m iterations, or after k2 candidates appear), and
///        per-class overrides; read from TOML/JSON files, environment
///        variables and command-line policy specs, and validated against the
///        classes a heap manages.
///
/// Host-only code. Sources are layered: defaults, then a file, then the
/// environment (see load_defrag_config()). Every rejected input raises
/// soaheap::config_error whose message names the key or environment variable,
/// the bad value and, for files, the file and position. docs/defrag-config.md
/// describes every key.
///
/// CUDA sources compiled by nvcc can include this header, but nvcc cannot
/// compile toml++, so there SOAHEAP_DEFRAG_CONFIG_TOML is 0: TOML reading is
/// unavailable (a compile error for parse_defrag_config_toml(), a config_error
/// for a .toml path) while JSON and everything else work. Read TOML files from
/// a host-compiled .cpp file.

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/config_document.hpp"
#include "detail/config_text.hpp"

namespace soaheap {

// ===========================================================================
// Model

/// @brief When defragmentation is started (paper, section "Defragmentation
///        Frequency").
enum class DefragPolicyKind {
  manual,  ///< only when the program calls heap.defrag<T>() itself
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
  std::map<std::string, DefragClassSettings> classes;  ///< per-class overrides by class name

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
/// Per-class variables are these prefixes followed by the class name in upper
/// case, with every character other than A-Z and 0-9 replaced by '_'.
inline constexpr const char class_factor_prefix[] = "SOAHEAP_DEFRAG_FACTOR_";
inline constexpr const char class_retained_candidates_prefix[] = "SOAHEAP_DEFRAG_RETAINED_";
inline constexpr const char class_min_compactions_prefix[] = "SOAHEAP_DEFRAG_MIN_COMPACTIONS_";
}  // namespace defrag_env

namespace detail {
/// @brief false, but only once a template is instantiated; lets a
///        static_assert fire exactly when an unavailable function is used.
template <class...>
inline constexpr bool always_false = false;
}  // namespace detail

// ===========================================================================
// API

/// @brief Reads a policy name: "manual", "every" or "mass".
/// @throw config_error for any other text, listing the valid names.
DefragPolicyKind parse_policy_kind(std::string_view name);

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
/// Rejects: n < 1; an effective n that is not below a class's capacity (the
/// global n is checked against every class that uses it; a class of capacity
/// 1 cannot be defragmented and is only an error when given its own factor);
/// negative or zero counts where they are meaningless; per-class settings for
/// unknown classes; policy `every` without m >= 1; policy `mass` without k2;
/// a percentage k2 outside (0, 100].
/// @throw config_error naming the first offending key and value.
void validate(const DefragConfig& config, const std::vector<ClassInfo>& classes);

// Functions that may read TOML. nvcc-compiled CUDA sources cannot include
// toml++ (see SOAHEAP_DEFRAG_CONFIG_TOML), so these functions differ between
// .cu and .cpp files; the inline namespace gives each variant its own symbol,
// so that a program mixing both kinds of files links two distinct functions
// rather than two conflicting definitions of one.
#if SOAHEAP_DEFRAG_CONFIG_TOML
#define SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE config_with_toml
#else
#define SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE config_without_toml
#endif
inline namespace SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE {

#if SOAHEAP_DEFRAG_CONFIG_TOML
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

#else
/// @brief Unavailable in CUDA sources compiled by nvcc; using it is a compile
///        error that says so. Call it from a host-compiled .cpp file, or use
///        parse_defrag_config_json().
template <class Unavailable = void>
DefragConfig parse_defrag_config_toml(std::string_view, const std::vector<ClassInfo>&, std::string_view = "<string>") {
  static_assert(detail::always_false<Unavailable>,
                "parse_defrag_config_toml() is not available in CUDA sources compiled by nvcc, which cannot compile "
                "toml++; call it from a .cpp file or use parse_defrag_config_json()");
  return {};
}
#endif

/// @brief Reads a configuration file, choosing the format by its extension
///        (".toml" or ".json", any letter case).
/// @throw config_error for another extension, an unreadable file, any error
///        parse_defrag_config_toml() / parse_defrag_config_json() raise, or a
///        .toml file read from a CUDA source compiled by nvcc (no TOML there).
DefragConfig load_defrag_config_file(const std::string& path, const std::vector<ClassInfo>& classes);

/// @brief The usual way to configure a heap: defaults, then the file at
///        @p path (if given), then the environment, then validate().
/// @param getenv_fn as for apply_defrag_env_overrides().
/// @throw config_error from any of these steps.
DefragConfig load_defrag_config(const std::optional<std::string>& path, const std::vector<ClassInfo>& classes,
                                const std::function<const char*(const char*)>& getenv_fn = std::getenv);

}  // namespace SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE

// ===========================================================================
// Implementation

namespace detail {

/// @brief Inclusive bounds of an integer setting.
struct integer_range {
  long long minimum;
  long long maximum;
};

// One definition of each setting's valid range, shared by the file reader,
// the environment reader, the policy spec and validate().
inline constexpr integer_range factor_range{1, INT_MAX};
inline constexpr integer_range retained_candidates_range{0, LLONG_MAX};
inline constexpr integer_range min_compactions_range{1, LLONG_MAX};
inline constexpr integer_range every_range{1, LLONG_MAX};
inline constexpr integer_range mass_count_range{1, LLONG_MAX};
inline constexpr double max_mass_percent = 100.0;

// Keys of the file schema.
inline constexpr std::string_view defrag_table_key = "defrag";
inline constexpr std::string_view policy_key = "policy";
inline constexpr std::string_view factor_key = "factor";
inline constexpr std::string_view retained_candidates_key = "retained_candidates";
inline constexpr std::string_view min_compactions_key = "min_compactions";
inline constexpr std::string_view every_key = "every";
inline constexpr std::string_view mass_threshold_key = "mass_threshold";
inline constexpr std::string_view auto_budget_key = "auto_budget";
inline constexpr std::string_view classes_key = "classes";

inline const std::vector<std::string_view>& top_level_keys() {
  static const std::vector<std::string_view> keys{defrag_table_key};
  return keys;
}
inline const std::vector<std::string_view>& defrag_table_keys() {
  static const std::vector<std::string_view> keys{
      policy_key,         factor_key,      retained_candidates_key, min_compactions_key, every_key,
      mass_threshold_key, auto_budget_key, classes_key};
  return keys;
}
inline const std::vector<std::string_view>& class_table_keys() {
  static const std::vector<std::string_view> keys{factor_key, retained_candidates_key, min_compactions_key};
  return keys;
}

template <class Strings>
std::string join(const Strings& items, std::string_view separator = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

/// @brief Where a problem was found: the origin ("file.toml:3:10",
///        "environment", or empty for a configuration built in code) and the
///        key (dotted path or variable name).
struct error_site {
  std::string origin;
  std::string key;
};

inline std::string message_prefix(const error_site& site) {
  return (site.origin.empty() ? std::string() : site.origin + ": ") + "invalid defrag configuration: ";
}

/// @brief Throws "<origin>: invalid defrag configuration: <key> = <value>: <problem>".
[[noreturn]] inline void throw_bad_value(const error_site& site, std::string_view shown_value,
                                         std::string_view problem) {
  throw config_error(message_prefix(site) + site.key + " = " + std::string(shown_value) + ": " + std::string(problem),
                     site.key);
}

/// @brief Throws "<origin>: invalid defrag configuration: <key>: <problem>",
///        for problems with a key itself rather than its value.
[[noreturn]] inline void throw_bad_key(const error_site& site, std::string_view problem) {
  throw config_error(message_prefix(site) + site.key + ": " + std::string(problem), site.key);
}

/// @brief Why @p value is outside @p range, or empty when it is inside.
inline std::string range_problem(long long value, integer_range range) {
  if (value < range.minimum) return "must be at least " + std::to_string(range.minimum);
  if (value > range.maximum) return "must be at most " + std::to_string(range.maximum);
  return {};
}

inline std::string names_of(const std::vector<ClassInfo>& classes) {
  if (classes.empty()) return "(none)";
  std::vector<std::string> names;
  for (const ClassInfo& info : classes) names.push_back(info.name);
  return join(names);
}

inline const ClassInfo* find_class(const std::vector<ClassInfo>& classes, const std::string& name) {
  for (const ClassInfo& info : classes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

inline std::optional<DefragPolicyKind> policy_from_name(std::string_view name) {
  for (const DefragPolicyKind kind :
       {DefragPolicyKind::manual, DefragPolicyKind::every, DefragPolicyKind::mass, DefragPolicyKind::automatic}) {
    if (name == to_string(kind)) return kind;
  }
  return std::nullopt;
}

inline std::string policy_problem() { return "expected one of \"manual\", \"every\", \"mass\", \"auto\""; }

/// The auto policy's budget: a share of the runtime, written "P%" (0 < P <= 100) or as a fraction
/// 0 < f <= 1.
inline text_reading<double> auto_budget_from_text(std::string_view text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number(percent ? text.substr(0, text.size() - 1) : text);
  char* end = nullptr;
  const double value = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size())
    return {std::nullopt, "expected a share of the runtime like \"2%\" or 0.02"};
  const double share = percent ? value / 100.0 : value;
  if (!(share > 0.0 && share <= 1.0)) return {std::nullopt, "the share must be above 0 and at most 100 % (1.0)"};
  return {share, {}};
}

inline std::string show_mass_threshold(const MassThreshold& threshold) {
  return threshold.is_percent ? format_decimal(threshold.value) + "%" : format_count(threshold.value);
}

/// @brief Why @p threshold is not a valid k2, or empty when it is. A zero
///        absolute value means "not set" and is accepted here.
inline std::string mass_threshold_problem(const MassThreshold& threshold) {
  if (threshold.is_percent) {
    // Written so that NaN also fails.
    if (!(threshold.value > 0 && threshold.value <= max_mass_percent)) {
      return "a percentage must be greater than 0 and at most 100";
    }
    return {};
  }
  if (threshold.value == 0) return {};
  if (!std::isfinite(threshold.value) || threshold.value != std::floor(threshold.value)) {
    return "a candidate count must be a whole number";
  }
  if (threshold.value < static_cast<double>(mass_count_range.minimum)) return "a candidate count must be at least 1";
  return {};
}

/// @brief Reads k2 from text: "5000" (candidate blocks) or "2.5%" (percent of
///        the heap's blocks).
inline text_reading<MassThreshold> mass_threshold_from_text(std::string_view text) {
  MassThreshold threshold;
  if (!text.empty() && text.back() == '%') {
    const text_reading<double> percent = decimal_from_text(text.substr(0, text.size() - 1));
    if (!percent.value) return {std::nullopt, "expected a percentage like \"2.5%\""};
    threshold = {*percent.value, true};
  } else {
    const text_reading<long long> count = integer_from_text(text);
    if (!count.value) {
      return {std::nullopt, count.problem == integer_out_of_range_problem
                                ? count.problem
                                : "expected a candidate count like 5000 or a percentage like \"2.5%\""};
    }
    if (*count.value < mass_count_range.minimum) return {std::nullopt, "a candidate count must be at least 1"};
    threshold = {static_cast<double>(*count.value), false};
  }
  if (std::string problem = mass_threshold_problem(threshold); !problem.empty()) return {std::nullopt, problem};
  return {threshold, {}};
}

/// @brief Reads an integer from text and checks it against @p range.
inline text_reading<long long> integer_in_range_from_text(std::string_view text, integer_range range) {
  text_reading<long long> reading = integer_from_text(text);
  if (reading.value) {
    if (std::string problem = range_problem(*reading.value, range); !problem.empty()) return {std::nullopt, problem};
  }
  return reading;
}

/// @brief Checks that factor @p factor can be used for class @p info.
///
/// The paper requires n < capacity. Already at n = capacity - 1 every block
/// that is not full is a candidate, so a larger n selects nothing new; it only
/// pairs each source (at most capacity - 1 objects) with more target blocks
/// than it has objects to move. A class with capacity 1 has nothing to merge,
/// so it is skipped unless the user addressed it explicitly
/// (@p explicit_for_class), which is then a mistake worth reporting.
inline void check_factor_fits_class(int factor, bool explicit_for_class, const ClassInfo& info,
                                    const error_site& site) {
  const std::string class_name = in_quotes(info.name);
  if (info.capacity <= 1) {
    if (explicit_for_class) {
      throw_bad_value(site, std::to_string(factor),
                      "class " + class_name + " holds one object per block (capacity " + std::to_string(info.capacity) +
                          "), so it cannot be defragmented; remove this setting");
    }
    return;
  }
  if (factor >= info.capacity) {
    std::string problem = "must be at most " + std::to_string(info.capacity - 1) + " for class " + class_name +
                          " (block capacity " + std::to_string(info.capacity) + ")";
    if (!explicit_for_class) problem += "; lower it or give the class its own factor";
    throw_bad_value(site, std::to_string(factor), problem);
  }
}

// ---------------------------------------------------------------------------
// File schema reader, shared by TOML and JSON

/// @brief Turns a parsed document into a DefragConfig, checking the schema.
class document_reader {
 public:
  document_reader(std::string_view source_name, const std::vector<ClassInfo>& classes)
      : source_name_(source_name), classes_(classes) {}

  DefragConfig read(const config_node& root) {
    if (root.type != config_node::kind::table) {
      throw config_error(describe_origin(source_name_, root.position) +
                         ": invalid defrag configuration: the document must be a table (JSON object), got " +
                         std::string(kind_in_words(root.type)));
    }
    for (const config_member& member : root.members) {
      if (member.key != defrag_table_key) reject_unknown_key(member, {}, top_level_keys());
      read_defrag_table(member);
    }
    check_factors_against_classes();
    return config_;
  }

 private:
  error_site value_site(const config_member& member, const std::string& path) const {
    return {describe_origin(source_name_, member.value.position), path};
  }

  [[noreturn]] void reject_unknown_key(const config_member& member, const std::string& parent_path,
                                       const std::vector<std::string_view>& allowed) const {
    const std::string path = append_key(parent_path, member.key);
    const std::string where = parent_path.empty() ? "at the top level" : "in " + parent_path;
    throw_bad_key({describe_origin(source_name_, member.key_position), path},
                  "unknown key; allowed " + where + ": " + join(allowed));
  }

  void require_table(const config_member& member, const std::string& path, std::string_view what) const {
    if (member.value.type != config_node::kind::table) {
      throw_bad_value(
          value_site(member, path), describe_value(member.value),
          "expected a table of " + std::string(what) + ", got " + std::string(kind_in_words(member.value.type)));
    }
  }

  long long read_integer(const config_member& member, const std::string& path, integer_range range) const {
    const config_node& value = member.value;
    const error_site site = value_site(member, path);
    if (value.type == config_node::kind::integer_out_of_range)
      throw_bad_value(site, value.text, integer_out_of_range_problem);
    if (value.type != config_node::kind::integer) {
      throw_bad_value(site, describe_value(value),
                      "expected an integer, got " + std::string(kind_in_words(value.type)));
    }
    if (std::string problem = range_problem(value.integer, range); !problem.empty()) {
      throw_bad_value(site, value.text, problem);
    }
    return value.integer;
  }

  DefragPolicyKind read_policy(const config_member& member, const std::string& path) const {
    const config_node& value = member.value;
    const std::optional<DefragPolicyKind> policy =
        value.type == config_node::kind::string ? policy_from_name(value.text) : std::nullopt;
    if (!policy) throw_bad_value(value_site(member, path), describe_value(value), policy_problem());
    return *policy;
  }

  // k2 is an integer count, or a string holding a count or a percentage.
  MassThreshold read_mass_threshold(const config_member& member, const std::string& path) const {
    const config_node& value = member.value;
    const error_site site = value_site(member, path);
    if (value.type == config_node::kind::integer) {
      if (value.integer < mass_count_range.minimum)
        throw_bad_value(site, value.text, "a candidate count must be at least 1");
      return {static_cast<double>(value.integer), false};
    }
    if (value.type == config_node::kind::string) {
      const text_reading<MassThreshold> threshold = mass_threshold_from_text(value.text);
      if (!threshold.value) throw_bad_value(site, describe_value(value), threshold.problem);
      return *threshold.value;
    }
    if (value.type == config_node::kind::integer_out_of_range)
      throw_bad_value(site, value.text, integer_out_of_range_problem);
    throw_bad_value(site, describe_value(value),
                    "expected a candidate count like 5000 or a percentage string like \"2.5%\", got " +
                        std::string(kind_in_words(value.type)));
  }

  double read_auto_budget(const config_member& member, const std::string& path) const {
    const config_node& value = member.value;
    const bool number = value.type == config_node::kind::floating_point || value.type == config_node::kind::integer;
    if (!number && value.type != config_node::kind::string)
      throw_bad_value(value_site(member, path), describe_value(value), "expected a share like 0.02 or \"2%\"");
    const text_reading<double> budget = auto_budget_from_text(value.text);
    if (!budget.value) throw_bad_value(value_site(member, path), describe_value(value), budget.problem);
    return *budget.value;
  }

  void read_defrag_table(const config_member& defrag) {
    const std::string defrag_path = append_key({}, defrag.key);
    require_table(defrag, defrag_path, "defragmentation settings");
    for (const config_member& member : defrag.value.members) {
      const std::string path = append_key(defrag_path, member.key);
      if (member.key == policy_key) {
        config_.policy = read_policy(member, path);
      } else if (member.key == factor_key) {
        config_.factor = static_cast<int>(read_integer(member, path, factor_range));
        global_factor_site_ = value_site(member, path);
      } else if (member.key == retained_candidates_key) {
        config_.retained_candidates = read_integer(member, path, retained_candidates_range);
      } else if (member.key == min_compactions_key) {
        config_.min_compactions = read_integer(member, path, min_compactions_range);
      } else if (member.key == every_key) {
        config_.every = read_integer(member, path, every_range);
      } else if (member.key == mass_threshold_key) {
        config_.mass_threshold = read_mass_threshold(member, path);
      } else if (member.key == auto_budget_key) {
        config_.auto_budget = read_auto_budget(member, path);
      } else if (member.key == classes_key) {
        read_classes_table(member, path);
      } else {
        reject_unknown_key(member, defrag_path, defrag_table_keys());
      }
    }
  }

  void read_classes_table(const config_member& classes, const std::string& classes_path) {
    require_table(classes, classes_path, "classes");
    for (const config_member& class_member : classes.value.members) {
      const std::string class_path = append_key(classes_path, class_member.key);
      if (!find_class(classes_, class_member.key)) {
        throw_bad_key(
            {describe_origin(source_name_, class_member.key_position), class_path},
            "unknown class " + in_quotes(class_member.key) + "; classes managed by this heap: " + names_of(classes_));
      }
      require_table(class_member, class_path, "per-class settings");
      DefragClassSettings& settings = config_.classes[class_member.key];
      for (const config_member& member : class_member.value.members) {
        const std::string path = append_key(class_path, member.key);
        if (member.key == factor_key) {
          settings.factor = static_cast<int>(read_integer(member, path, factor_range));
          class_factor_sites_[class_member.key] = value_site(member, path);
        } else if (member.key == retained_candidates_key) {
          settings.retained_candidates = read_integer(member, path, retained_candidates_range);
        } else if (member.key == min_compactions_key) {
          settings.min_compactions = read_integer(member, path, min_compactions_range);
        } else {
          reject_unknown_key(member, class_path, class_table_keys());
        }
      }
    }
  }

  // Needs the whole document: a class's own factor replaces the global one.
  void check_factors_against_classes() const {
    for (const ClassInfo& info : classes_) {
      const auto class_site = class_factor_sites_.find(info.name);
      if (class_site != class_factor_sites_.end()) {
        check_factor_fits_class(config_.factor_for(info.name), true, info, class_site->second);
      } else if (global_factor_site_) {
        check_factor_fits_class(config_.factor, false, info, *global_factor_site_);
      }
    }
  }

  std::string source_name_;
  const std::vector<ClassInfo>& classes_;
  DefragConfig config_;
  std::optional<error_site> global_factor_site_;
  std::map<std::string, error_site> class_factor_sites_;
};

inline DefragConfig read_document(const parsed_document& document, const std::vector<ClassInfo>& classes,
                                  std::string_view source_name) {
  if (!document.syntax_error.empty()) throw config_error(document.syntax_error);
  return document_reader(source_name, classes).read(document.root);
}

// ---------------------------------------------------------------------------
// Environment reader

inline constexpr std::string_view environment_origin = "environment";

/// @brief Looks up SOAHEAP_DEFRAG_* variables and reports bad values with the
///        variable's name.
class environment_reader {
 public:
  explicit environment_reader(const std::function<const char*(const char*)>& getenv_fn) : getenv_(getenv_fn) {}

  std::optional<std::string> text(const std::string& name) const {
    const char* value = getenv_(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

  std::optional<long long> integer(const std::string& name, integer_range range) const {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    const text_reading<long long> reading = integer_in_range_from_text(*value, range);
    if (!reading.value) fail(name, *value, reading.problem);
    return reading.value;
  }

  std::optional<DefragPolicyKind> policy(const std::string& name) const {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    const std::optional<DefragPolicyKind> policy = policy_from_name(*value);
    if (!policy) fail(name, *value, policy_problem());
    return policy;
  }

  std::optional<double> auto_budget(const std::string& name) const {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    const text_reading<double> reading = auto_budget_from_text(*value);
    if (!reading.value) fail(name, *value, reading.problem);
    return reading.value;
  }

  std::optional<MassThreshold> mass_threshold(const std::string& name) const {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    const text_reading<MassThreshold> reading = mass_threshold_from_text(*value);
    if (!reading.value) fail(name, *value, reading.problem);
    return reading.value;
  }

  [[noreturn]] static void fail(const std::string& name, const std::string& value, std::string_view problem) {
    throw_bad_value(site(name), in_quotes(value), problem);
  }

  static error_site site(const std::string& name) { return {std::string(environment_origin), name}; }

 private:
  const std::function<const char*(const char*)>& getenv_;
};

/// @brief Rejects a set per-class variable whose name two classes share (e.g.
///        "Fish" and "FISH", or "a::b" and "a_b"): applying it to either
///        class would be a guess.
inline void reject_ambiguous_class_variable(const environment_reader& environment, std::string_view prefix,
                                            const std::vector<ClassInfo>& classes) {
  std::map<std::string, std::vector<std::string>> classes_by_variable;
  for (const ClassInfo& info : classes) {
    std::vector<std::string>& names = classes_by_variable[std::string(prefix) + environment_suffix(info.name)];
    if (std::find(names.begin(), names.end(), info.name) == names.end()) names.push_back(info.name);
  }
  for (const auto& [variable, names] : classes_by_variable) {
    if (names.size() < 2) continue;
    if (const std::optional<std::string> value = environment.text(variable)) {
      std::vector<std::string> shown;
      for (const std::string& name : names) shown.push_back(in_quotes(name));
      environment_reader::fail(variable, *value, "ambiguous: classes " + join(shown) + " all map to this variable");
    }
  }
}

[[noreturn]] inline void throw_bad_policy_spec(std::string_view spec, std::string_view problem) {
  throw config_error("invalid defrag policy spec " + in_quotes(spec) + ": " + std::string(problem) +
                         "; valid forms: \"none\", \"every:M\", \"mass:K2\", \"mass:P%\", \"auto\", \"auto:P%\"",
                     "policy spec");
}

inline bool is_known_policy(DefragPolicyKind policy) {
  return policy == DefragPolicyKind::manual || policy == DefragPolicyKind::every || policy == DefragPolicyKind::mass ||
         policy == DefragPolicyKind::automatic;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Public functions

inline std::string_view to_string(DefragPolicyKind policy) {
  switch (policy) {
    case DefragPolicyKind::manual: return "manual";
    case DefragPolicyKind::every: return "every";
    case DefragPolicyKind::mass: return "mass";
    case DefragPolicyKind::automatic: return "auto";
  }
  return "invalid";
}

inline DefragPolicyKind parse_policy_kind(std::string_view name) {
  if (const std::optional<DefragPolicyKind> policy = detail::policy_from_name(name)) return *policy;
  detail::throw_bad_value({{}, "policy"}, detail::in_quotes(name), detail::policy_problem());
}

inline void apply_policy_spec(DefragConfig& config, std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::optional<std::string_view> argument =
      colon == std::string_view::npos ? std::nullopt : std::optional<std::string_view>(spec.substr(colon + 1));

  if (name == "none" || name == "manual") {
    if (argument) detail::throw_bad_policy_spec(spec, "\"" + std::string(name) + "\" takes no argument");
    config.policy = DefragPolicyKind::manual;
  } else if (name == "every") {
    if (!argument) detail::throw_bad_policy_spec(spec, "\"every\" needs the interval, e.g. \"every:50\"");
    const detail::text_reading<long long> interval = detail::integer_in_range_from_text(*argument, detail::every_range);
    if (!interval.value)
      detail::throw_bad_policy_spec(spec, "interval " + detail::in_quotes(*argument) + ": " + interval.problem);
    config.policy = DefragPolicyKind::every;
    config.every = *interval.value;
  } else if (name == "mass") {
    if (!argument)
      detail::throw_bad_policy_spec(spec, "\"mass\" needs the threshold, e.g. \"mass:5000\" or \"mass:2.5%\"");
    const detail::text_reading<MassThreshold> threshold = detail::mass_threshold_from_text(*argument);
    if (!threshold.value)
      detail::throw_bad_policy_spec(spec, "threshold " + detail::in_quotes(*argument) + ": " + threshold.problem);
    config.policy = DefragPolicyKind::mass;
    config.mass_threshold = *threshold.value;
  } else if (name == "auto") {
    if (argument) {
      const detail::text_reading<double> budget = detail::auto_budget_from_text(*argument);
      if (!budget.value)
        detail::throw_bad_policy_spec(spec, "budget " + detail::in_quotes(*argument) + ": " + budget.problem);
      config.auto_budget = *budget.value;
    }
    config.policy = DefragPolicyKind::automatic;
  } else {
    detail::throw_bad_policy_spec(spec, "unknown policy " + detail::in_quotes(name));
  }
}

inline DefragConfig parse_defrag_config_json(std::string_view text, const std::vector<ClassInfo>& classes,
                                             std::string_view source_name) {
  return detail::read_document(detail::parse_json_document(text, source_name), classes, source_name);
}

inline void apply_defrag_env_overrides(DefragConfig& config, const std::vector<ClassInfo>& classes,
                                       const std::function<const char*(const char*)>& getenv_fn) {
  using detail::environment_reader;
  const environment_reader environment(getenv_fn);

  if (auto policy = environment.policy(defrag_env::policy)) config.policy = *policy;
  const std::optional<long long> global_factor = environment.integer(defrag_env::factor, detail::factor_range);
  if (global_factor) config.factor = static_cast<int>(*global_factor);
  if (auto retained = environment.integer(defrag_env::retained_candidates, detail::retained_candidates_range)) {
    config.retained_candidates = *retained;
  }
  if (auto minimum = environment.integer(defrag_env::min_compactions, detail::min_compactions_range)) {
    config.min_compactions = *minimum;
  }
  if (auto every = environment.integer(defrag_env::every, detail::every_range)) config.every = *every;
  if (auto threshold = environment.mass_threshold(defrag_env::mass_threshold)) config.mass_threshold = *threshold;
  if (auto budget = environment.auto_budget(defrag_env::auto_budget)) config.auto_budget = *budget;

  for (const char* prefix : {defrag_env::class_factor_prefix, defrag_env::class_retained_candidates_prefix,
                             defrag_env::class_min_compactions_prefix}) {
    detail::reject_ambiguous_class_variable(environment, prefix, classes);
  }

  // Per-class variables, then the capacity check for every factor that came
  // from the environment (file values were checked when the file was read).
  for (const ClassInfo& info : classes) {
    const std::string suffix = detail::environment_suffix(info.name);
    const std::string factor_variable = defrag_env::class_factor_prefix + suffix;
    const std::optional<long long> class_factor = environment.integer(factor_variable, detail::factor_range);
    if (class_factor) config.classes[info.name].factor = static_cast<int>(*class_factor);
    if (auto retained = environment.integer(defrag_env::class_retained_candidates_prefix + suffix,
                                            detail::retained_candidates_range)) {
      config.classes[info.name].retained_candidates = *retained;
    }
    if (auto minimum =
            environment.integer(defrag_env::class_min_compactions_prefix + suffix, detail::min_compactions_range)) {
      config.classes[info.name].min_compactions = *minimum;
    }

    const auto settings = config.classes.find(info.name);
    const bool class_has_own_factor = settings != config.classes.end() && settings->second.factor;
    if (class_factor) {
      detail::check_factor_fits_class(config.factor_for(info.name), true, info,
                                      environment_reader::site(factor_variable));
    } else if (global_factor && !class_has_own_factor) {
      detail::check_factor_fits_class(config.factor, false, info, environment_reader::site(defrag_env::factor));
    }
  }
}

inline void validate(const DefragConfig& config, const std::vector<ClassInfo>& classes) {
  using namespace detail;
  const auto key = [](std::string_view name) { return append_key(defrag_table_key, name); };
  const auto check_range = [](const std::string& path, long long value, integer_range range) {
    if (std::string problem = range_problem(value, range); !problem.empty()) {
      throw_bad_value({{}, path}, std::to_string(value), problem);
    }
  };

  if (!is_known_policy(config.policy)) {
    throw_bad_value({{}, key(policy_key)}, std::to_string(static_cast<int>(config.policy)), policy_problem());
  }
  check_range(key(factor_key), config.factor, factor_range);
  check_range(key(retained_candidates_key), config.retained_candidates, retained_candidates_range);
  check_range(key(min_compactions_key), config.min_compactions, min_compactions_range);
  if (config.every != 0) check_range(key(every_key), config.every, every_range);  // 0 means "not set"
  if (std::string problem = mass_threshold_problem(config.mass_threshold); !problem.empty()) {
    throw_bad_value({{}, key(mass_threshold_key)}, show_mass_threshold(config.mass_threshold), problem);
  }

  if (!(config.auto_budget > 0.0 && config.auto_budget <= 1.0)) {
    throw_bad_value({{}, key(auto_budget_key)}, std::to_string(config.auto_budget),
                    "the share must be above 0 and at most 1 (100 %)");
  }
  if (config.policy == DefragPolicyKind::every && config.every <= 0) {
    throw_bad_value({{}, key(every_key)}, std::to_string(config.every),
                    "policy \"every\" needs an interval of at least 1 iteration (set " + key(every_key) + " or " +
                        defrag_env::every + ")");
  }
  if (config.policy == DefragPolicyKind::mass && !config.mass_threshold.is_set()) {
    throw_bad_value({{}, key(mass_threshold_key)}, show_mass_threshold(config.mass_threshold),
                    "policy \"mass\" needs a threshold (set " + key(mass_threshold_key) + " or " +
                        defrag_env::mass_threshold + ")");
  }

  const std::string classes_path = key(classes_key);
  for (const auto& [class_name, settings] : config.classes) {
    const std::string class_path = append_key(classes_path, class_name);
    if (!find_class(classes, class_name)) {
      throw_bad_key({{}, class_path},
                    "unknown class " + in_quotes(class_name) + "; classes managed by this heap: " + names_of(classes));
    }
    if (settings.factor) check_range(append_key(class_path, factor_key), *settings.factor, factor_range);
    if (settings.retained_candidates) {
      check_range(append_key(class_path, retained_candidates_key), *settings.retained_candidates,
                  retained_candidates_range);
    }
    if (settings.min_compactions) {
      check_range(append_key(class_path, min_compactions_key), *settings.min_compactions, min_compactions_range);
    }
  }

  for (const ClassInfo& info : classes) {
    const auto settings = config.classes.find(info.name);
    const bool has_own_factor = settings != config.classes.end() && settings->second.factor;
    const std::string path =
        has_own_factor ? append_key(append_key(classes_path, info.name), factor_key) : key(factor_key);
    check_factor_fits_class(config.factor_for(info.name), has_own_factor, info, {{}, path});
  }
}

inline namespace SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE {

#if SOAHEAP_DEFRAG_CONFIG_TOML
inline DefragConfig parse_defrag_config_toml(std::string_view text, const std::vector<ClassInfo>& classes,
                                             std::string_view source_name) {
  return detail::read_document(detail::parse_toml_document(text, source_name), classes, source_name);
}

#endif

inline DefragConfig load_defrag_config_file(const std::string& path, const std::vector<ClassInfo>& classes) {
  std::string extension = std::filesystem::path(path).extension().string();
  for (char& character : extension) {
    if (character >= 'A' && character <= 'Z') character = static_cast<char>(character - 'A' + 'a');
  }
  const bool is_toml = extension == ".toml";
  if (!is_toml && extension != ".json") {
    const std::string shown = extension.empty() ? "no extension" : "extension " + detail::in_quotes(extension);
    throw config_error("cannot read defrag configuration file " + detail::in_quotes(path) + ": unsupported " + shown +
                       " (expected .toml or .json)");
  }

  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw config_error("cannot read defrag configuration file " + detail::in_quotes(path) + ": it is a directory");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const bool exists = std::filesystem::exists(path, error);
    throw config_error("cannot read defrag configuration file " + detail::in_quotes(path) + ": " +
                       (exists ? "permission denied or unreadable" : "no such file"));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) {
    throw config_error("cannot read defrag configuration file " + detail::in_quotes(path) + ": read error");
  }

  const std::string text = contents.str();
#if SOAHEAP_DEFRAG_CONFIG_TOML
  if (is_toml) return parse_defrag_config_toml(text, classes, path);
#else
  if (is_toml) {
    throw config_error("cannot read defrag configuration file " + detail::in_quotes(path) +
                       ": TOML is not available in CUDA sources compiled by nvcc, which cannot compile toml++; "
                       "load the configuration from a .cpp file or use a .json file");
  }
#endif
  return parse_defrag_config_json(text, classes, path);
}

inline DefragConfig load_defrag_config(const std::optional<std::string>& path, const std::vector<ClassInfo>& classes,
                                       const std::function<const char*(const char*)>& getenv_fn) {
  DefragConfig config = path ? load_defrag_config_file(*path, classes) : DefragConfig{};
  apply_defrag_env_overrides(config, classes, getenv_fn);
  validate(config, classes);
  return config;
}

}  // namespace SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE

}  // namespace soaheap

#undef SOAHEAP_DEFRAG_CONFIG_TOML_NAMESPACE
