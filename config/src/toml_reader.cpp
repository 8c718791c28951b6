/// @file
/// @brief parse_defrag_config_toml(): toml++ parses, schema_reader walks
///        toml++'s own tree. Compiled by the C++ compiler only: nvcc's front
///        end cannot compile toml++, which is why configuration reading is a
///        compiled library rather than header code.

#include "schema_reader.hpp"

#include <soaheap/config/defrag_config.hpp>

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef TOML_EXCEPTIONS
#define TOML_EXCEPTIONS 1
#endif
#include <toml++/toml.h>
static_assert(TOML_EXCEPTIONS, "soaheap's configuration reader relies on toml++ reporting syntax errors as exceptions");

namespace soaheap {
namespace detail {
namespace {

source_position position_of(const toml::source_region& region) { return {region.begin.line, region.begin.column}; }

/// @brief schema_reader's view of a toml::node.
struct toml_adapter {
  using node = toml::node;

  static value_kind kind(const node& value) {
    switch (value.type()) {
      case toml::node_type::table: return value_kind::table;
      case toml::node_type::array: return value_kind::array;
      case toml::node_type::string: return value_kind::string;
      case toml::node_type::integer: return value_kind::integer;
      case toml::node_type::floating_point: return value_kind::floating_point;
      case toml::node_type::boolean: return value_kind::boolean;
      default: return value_kind::other;  // dates and times
    }
  }
  static long long integer(const node& value) { return value.as_integer()->get(); }
  static std::string string(const node& value) { return value.as_string()->get(); }
  static bool boolean(const node& value) { return value.as_boolean()->get(); }
  static std::string as_written(const node& value) {
    if (const auto* number = value.as_integer()) return std::to_string(number->get());
    if (const auto* number = value.as_floating_point()) return format_decimal(number->get());
    if (const auto* flag = value.as_boolean()) return flag->get() ? "true" : "false";
    std::ostringstream shown;  // dates and times: no key accepts them, but show them as written
    if (const auto* date = value.as_date()) shown << date->get();
    if (const auto* time = value.as_time()) shown << time->get();
    if (const auto* date_time = value.as_date_time()) shown << date_time->get();
    return shown.str();
  }
  static source_position position(const node& value) { return position_of(value.source()); }
  template <class Function>
  static void for_each_member(const node& table, Function&& function) {
    for (const auto& [key, value] : *table.as_table()) {
      function(std::string(key.str()), position_of(key.source()), value);
    }
  }
};

}  // namespace
}  // namespace detail

DefragConfig parse_defrag_config_toml(std::string_view text, const std::vector<ClassInfo>& classes,
                                      std::string_view source_name) {
  toml::table document;
  try {
    document = toml::parse(text, source_name);
  } catch (const toml::parse_error& error) {
    throw config_error(detail::describe_origin(source_name, detail::position_of(error.source())) +
                       ": invalid TOML: " + std::string(error.description()));
  }
  return detail::schema_reader<detail::toml_adapter>(source_name, classes).read(document);
}

}  // namespace soaheap
