#pragma once
/// @file
/// @brief Text helpers for the defragmentation configuration: strict number
///        reading for environment values and policy specs, and the quoting
///        used in error messages.
///
/// Everything here is an implementation detail of
/// <soaheap/defrag/defrag_config.hpp>; it depends only on the standard library.

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

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

}  // namespace soaheap::detail
