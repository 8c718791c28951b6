/// @file
/// @brief The configuration sources other than file syntax: policy names and
///        command-line policy specs, SOAHEAP_DEFRAG_* environment variables,
///        whole-configuration validation, and loading a file by extension.

#include "config_rules.hpp"

#include <soaheap/config/defrag_config.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace soaheap {

namespace detail {
namespace {

// ---------------------------------------------------------------------------
// Environment reader

constexpr std::string_view environment_origin = "environment";

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

  std::optional<bool> boolean(const std::string& name) const {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    const text_reading<bool> reading = boolean_from_text(*value);
    if (!reading.value) fail(name, *value, reading.problem);
    return reading.value;
  }

  std::optional<std::string> order(const std::string& name) const {
    std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    if (std::string problem = order_problem(*value); !problem.empty()) fail(name, *value, problem);
    return value;
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
void reject_ambiguous_class_variable(const environment_reader& environment, std::string_view prefix,
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

bool is_known_policy(DefragPolicyKind policy) {
  return policy == DefragPolicyKind::manual || policy == DefragPolicyKind::every || policy == DefragPolicyKind::mass ||
         policy == DefragPolicyKind::automatic;
}

}  // namespace
}  // namespace detail

// ---------------------------------------------------------------------------
// Public functions

std::string_view to_string(DefragPolicyKind policy) {
  switch (policy) {
    case DefragPolicyKind::manual: return "manual";
    case DefragPolicyKind::every: return "every";
    case DefragPolicyKind::mass: return "mass";
    case DefragPolicyKind::automatic: return "auto";
  }
  return "invalid";
}

DefragPolicyKind parse_policy_kind(std::string_view name) {
  if (const std::optional<DefragPolicyKind> policy = detail::policy_from_name(name)) return *policy;
  detail::throw_bad_value({{}, "policy"}, detail::in_quotes(name), detail::policy_problem());
}

void apply_policy_spec(DefragConfig& config, std::string_view spec) {
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

void apply_defrag_env_overrides(DefragConfig& config, const std::vector<ClassInfo>& classes,
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
  if (auto window = environment.integer(defrag_env::locality_window, detail::locality_window_range)) {
    config.locality_window = *window;
  }
  if (auto release = environment.boolean(defrag_env::release_memory)) config.release_memory = *release;
  if (auto map = environment.boolean(defrag_env::map_fresh_blocks)) config.map_fresh_blocks = *map;

  for (const char* prefix : {defrag_env::class_factor_prefix, defrag_env::class_retained_candidates_prefix,
                             defrag_env::class_min_compactions_prefix, defrag_env::class_locality_window_prefix,
                             defrag_env::class_order_prefix}) {
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
    if (auto window =
            environment.integer(defrag_env::class_locality_window_prefix + suffix, detail::locality_window_range)) {
      config.classes[info.name].locality_window = *window;
    }
    if (auto order = environment.order(defrag_env::class_order_prefix + suffix)) config.classes[info.name].order = *order;

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

bool is_valid_order_name(std::string_view order) { return detail::order_problem(order).empty(); }

void validate(const DefragConfig& config, const std::vector<ClassInfo>& classes) {
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
  check_range(key(locality_window_key), config.locality_window, locality_window_range);
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
    if (settings.locality_window) {
      check_range(append_key(class_path, locality_window_key), *settings.locality_window, locality_window_range);
    }
    if (settings.order) {
      if (std::string problem = order_problem(*settings.order); !problem.empty())
        throw_bad_value({{}, append_key(class_path, order_key)}, in_quotes(*settings.order), problem);
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

DefragConfig load_defrag_config_file(const std::string& path, const std::vector<ClassInfo>& classes) {
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
  if (is_toml) return parse_defrag_config_toml(text, classes, path);
  return parse_defrag_config_json(text, classes, path);
}

DefragConfig load_defrag_config(const std::optional<std::string>& path, const std::vector<ClassInfo>& classes,
                                const std::function<const char*(const char*)>& getenv_fn) {
  DefragConfig config = path ? load_defrag_config_file(*path, classes) : DefragConfig{};
  apply_defrag_env_overrides(config, classes, getenv_fn);
  validate(config, classes);
  return config;
}

}  // namespace soaheap
