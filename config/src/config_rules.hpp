#pragma once
/// @file
/// @brief Private to the soaheap::config library: the rules every source of a
///        defragmentation configuration shares (valid ranges, schema keys,
///        strict number reading, error messages naming key and value).

#include <soaheap/config/defrag_config.hpp>

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace soaheap::detail {

/// @brief The result of reading a value from text: the value, or a short
///        explanation of why the text was rejected.
template <class Value>
struct text_reading {
  std::optional<Value> value;
  std::string problem;  ///< empty when `value` is set
};

/// @brief The problem reported for an integer that does not fit in 64 bits;
///        callers compare against it to keep that precise explanation.
inline constexpr std::string_view integer_out_of_range_problem = "integer out of range";

/// @brief Renders @p text as a double-quoted literal.
///
/// Messages quote user-supplied text so that an empty value, trailing
/// whitespace or a control character is visible instead of silently vanishing.
inline std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  for (const char character : text) {
    switch (character) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: {
        const auto code = static_cast<unsigned char>(character);
        if (code < 0x20 || code == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned>(code));
          out += escaped;
        } else {
          out += character;
        }
      }
    }
  }
  out += '"';
  return out;
}

/// @brief Whether @p key can be written unquoted in a TOML dotted key.
inline bool is_bare_key(std::string_view key) {
  if (key.empty()) return false;
  for (const char character : key) {
    const bool allowed = (character >= 'A' && character <= 'Z') || (character >= 'a' && character <= 'z') ||
                         (character >= '0' && character <= '9') || character == '_' || character == '-';
    if (!allowed) return false;
  }
  return true;
}

/// @brief Appends @p key to the dotted key path @p path.
///
/// Keys that are not bare (a class named `ns::Fish` or `a.b`) are quoted the
/// way TOML itself would require, so the printed path stays unambiguous and can
/// be pasted back into a configuration file.
inline std::string append_key(std::string_view path, std::string_view key) {
  std::string out(path);
  if (!out.empty()) out += '.';
  out += is_bare_key(key) ? std::string(key) : in_quotes(key);
  return out;
}

/// @brief Reads a whole decimal integer from @p text.
///
/// Deliberately strict: no surrounding whitespace, no leading '+', no suffix.
/// A value like "3x" is far more likely a typo than an intent, and a silently
/// truncated number would be worse than an error.
inline text_reading<long long> integer_from_text(std::string_view text) {
  if (text.empty()) return {std::nullopt, "empty value, expected an integer"};
  long long value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error == std::errc::result_out_of_range) return {std::nullopt, std::string(integer_out_of_range_problem)};
  if (error != std::errc() || stop != end) return {std::nullopt, "expected an integer"};
  return {value, {}};
}

/// @brief Reads a whole, finite decimal number (e.g. "2.5") from @p text, with
///        the same strictness as integer_from_text().
inline text_reading<double> decimal_from_text(std::string_view text) {
  if (text.empty()) return {std::nullopt, "empty value, expected a number"};
  double value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error == std::errc::result_out_of_range) return {std::nullopt, "number out of range"};
  if (error != std::errc() || stop != end || !std::isfinite(value)) return {std::nullopt, "expected a number"};
  return {value, {}};
}

/// @brief Formats @p value in its shortest round-trip form, always looking
///        like a floating-point number ("2.0", not "2") so that a message
///        about a float never reads as if it were about an integer.
inline std::string format_decimal(double value) {
  char buffer[64];
  const auto [stop, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (error != std::errc()) return "?";
  std::string out(buffer, stop);
  if (std::isfinite(value) && out.find_first_of(".eE") == std::string::npos) out += ".0";
  return out;
}

/// @brief Formats a non-negative whole number held in a double without a
///        fractional part (thresholds are stored as double, shown as counts).
inline std::string format_count(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e18) {
    return std::to_string(static_cast<long long>(value));
  }
  return format_decimal(value);
}

/// @brief Turns a class name into the upper-case suffix of its per-class
///        environment variables.
///
/// Environment variable names are portable only when made of letters, digits
/// and '_', so every other character (':' in `ns::Fish`, '<' in templates)
/// becomes '_'. Uses ASCII rules on purpose: the result must not depend on the
/// process locale.
inline std::string environment_suffix(std::string_view class_name) {
  std::string out;
  out.reserve(class_name.size());
  for (const char character : class_name) {
    if (character >= 'a' && character <= 'z') {
      out += static_cast<char>(character - 'a' + 'A');
    } else if ((character >= 'A' && character <= 'Z') || (character >= '0' && character <= '9')) {
      out += character;
    } else {
      out += '_';
    }
  }
  return out;
}


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
inline constexpr integer_range locality_window_range{0, LLONG_MAX};  // blocks; 0 = off
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
inline constexpr std::string_view locality_window_key = "locality_window";
inline constexpr std::string_view release_memory_key = "release_memory";
inline constexpr std::string_view map_fresh_blocks_key = "map_fresh_blocks";
inline constexpr std::string_view classes_key = "classes";
inline constexpr std::string_view order_key = "order";

inline const std::vector<std::string_view>& top_level_keys() {
  static const std::vector<std::string_view> keys{defrag_table_key};
  return keys;
}
inline const std::vector<std::string_view>& defrag_table_keys() {
  static const std::vector<std::string_view> keys{
      policy_key,         factor_key,      retained_candidates_key, min_compactions_key,   every_key,
      mass_threshold_key, auto_budget_key, locality_window_key,     release_memory_key,    map_fresh_blocks_key,
      classes_key};
  return keys;
}
inline const std::vector<std::string_view>& class_table_keys() {
  static const std::vector<std::string_view> keys{factor_key, retained_candidates_key, min_compactions_key,
                                                  locality_window_key, order_key};
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

/// What is wrong with an order setting ("" when nothing): "none", or "field:" / "key:" followed by
/// a C identifier (the name the application gave the order).
inline std::string order_problem(std::string_view order) {
  if (order == "none") return {};
  const auto colon = order.find(':');
  const std::string_view kind = order.substr(0, colon == std::string_view::npos ? 0 : colon);
  const std::string_view name = colon == std::string_view::npos ? std::string_view{} : order.substr(colon + 1);
  const auto identifier_character = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
  };
  bool identifier = !name.empty();
  for (std::size_t i = 0; identifier && i < name.size(); ++i) identifier = identifier_character(name[i], i == 0);
  if ((kind == "field" || kind == "key") && identifier) return {};
  return "expected \"none\", \"field:NAME\" or \"key:NAME\" (NAME: the order's name in the application, e.g. "
         "\"field:position\")";
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

/// @brief Why a boolean setting was rejected (files take a boolean, the environment one of these words).
inline constexpr std::string_view boolean_problem = "expected one of \"true\", \"false\", \"1\", \"0\", \"on\", \"off\"";

/// @brief Reads a switch from text: "true", "1" or "on" for on, "false", "0" or "off" for off; lower
///        case only, like the policy names, and nothing around them.
inline text_reading<bool> boolean_from_text(std::string_view text) {
  if (text == "true" || text == "1" || text == "on") return {true, {}};
  if (text == "false" || text == "0" || text == "off") return {false, {}};
  return {std::nullopt, std::string(boolean_problem)};
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

}  // namespace soaheap::detail
