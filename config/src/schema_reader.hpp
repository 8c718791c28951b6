#pragma once
/// @file
/// @brief Private to the soaheap::config library: reads the file schema
///        (`[defrag]`, `[defrag.classes.<Name>]`) straight from a parsed
///        document into a DefragConfig.
///
/// The reader is written once and walks each parser's own tree through a
/// small adapter (toml_reader.cpp: toml::node, json_reader.cpp:
/// nlohmann::json), so TOML and JSON get identical key, type and range checks
/// without copying either document into a tree of our own. An adapter
/// provides, for its `node` type:
///  - `static value_kind kind(const node&)`
///  - `static long long integer(const node&)` (valid for value_kind::integer)
///  - `static std::string string(const node&)` (valid for value_kind::string)
///  - `static bool boolean(const node&)` (valid for value_kind::boolean)
///  - `static std::string as_written(const node&)` (scalars, for messages)
///  - `static source_position position(const node&)`
///  - `template <class F> static void for_each_member(const node&, F f)`,
///    calling `f(key, key_position, value)` for each key of a table.

#include "config_rules.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace soaheap::detail {

/// @brief A 1-based line and column in a document; 0 means unknown (JSON
///        values: nlohmann::json records positions only for syntax errors).
struct source_position {
  std::size_t line = 0;
  std::size_t column = 0;
  bool known() const noexcept { return line != 0; }
};

/// @brief "name:line:column", or just "name" when the position is unknown.
inline std::string describe_origin(std::string_view source_name, source_position position) {
  std::string out(source_name);
  if (position.known()) out += ':' + std::to_string(position.line) + ':' + std::to_string(position.column);
  return out;
}

/// @brief What a value is, in the terms the schema cares about.
enum class value_kind {
  table,  ///< TOML table or JSON object
  array,
  string,
  integer,
  integer_out_of_range,  ///< a JSON integer beyond the signed 64-bit range
  floating_point,
  boolean,
  other,  ///< JSON null, TOML date/time
};

/// @brief The kind of a value in words, for "expected X, got Y" messages.
inline std::string_view kind_in_words(value_kind kind) {
  switch (kind) {
    case value_kind::table: return "a table";
    case value_kind::array: return "an array";
    case value_kind::string: return "a string";
    case value_kind::integer:
    case value_kind::integer_out_of_range: return "an integer";
    case value_kind::floating_point: return "a floating-point number";
    case value_kind::boolean: return "a boolean";
    case value_kind::other: break;
  }
  return "a value of another type";
}

/// @brief Turns a parsed document into a DefragConfig, checking the schema.
template <class Adapter>
class schema_reader {
 public:
  using node = typename Adapter::node;

  schema_reader(std::string_view source_name, const std::vector<ClassInfo>& classes)
      : source_name_(source_name), classes_(classes) {}

  DefragConfig read(const node& root) {
    if (Adapter::kind(root) != value_kind::table) {
      throw config_error(describe_origin(source_name_, Adapter::position(root)) +
                         ": invalid defrag configuration: the document must be a table (JSON object), got " +
                         std::string(kind_in_words(Adapter::kind(root))));
    }
    Adapter::for_each_member(root, [&](const std::string& key, source_position key_position, const node& value) {
      if (key != defrag_table_key) reject_unknown_key(key, key_position, {}, top_level_keys());
      read_defrag_table(key, value);
    });
    check_factors_against_classes();
    return config_;
  }

 private:
  /// How a value is shown in error messages: strings quoted, containers by
  /// kind (printing a whole table would bury the point).
  static std::string describe_value(const node& value) {
    switch (Adapter::kind(value)) {
      case value_kind::string: return in_quotes(Adapter::string(value));
      case value_kind::table:
      case value_kind::array: return std::string(kind_in_words(Adapter::kind(value)));
      default: return Adapter::as_written(value);
    }
  }

  error_site value_site(const node& value, const std::string& path) const {
    return {describe_origin(source_name_, Adapter::position(value)), path};
  }

  [[noreturn]] void reject_unknown_key(const std::string& key, source_position key_position,
                                       const std::string& parent_path,
                                       const std::vector<std::string_view>& allowed) const {
    const std::string path = append_key(parent_path, key);
    const std::string where = parent_path.empty() ? "at the top level" : "in " + parent_path;
    throw_bad_key({describe_origin(source_name_, key_position), path},
                  "unknown key; allowed " + where + ": " + join(allowed));
  }

  void require_table(const node& value, const std::string& path, std::string_view what) const {
    if (Adapter::kind(value) != value_kind::table) {
      throw_bad_value(value_site(value, path), describe_value(value),
                      "expected a table of " + std::string(what) + ", got " +
                          std::string(kind_in_words(Adapter::kind(value))));
    }
  }

  long long read_integer(const node& value, const std::string& path, integer_range range) const {
    const error_site site = value_site(value, path);
    const value_kind kind = Adapter::kind(value);
    if (kind == value_kind::integer_out_of_range)
      throw_bad_value(site, Adapter::as_written(value), integer_out_of_range_problem);
    if (kind != value_kind::integer) {
      throw_bad_value(site, describe_value(value), "expected an integer, got " + std::string(kind_in_words(kind)));
    }
    const long long number = Adapter::integer(value);
    if (std::string problem = range_problem(number, range); !problem.empty()) {
      throw_bad_value(site, std::to_string(number), problem);
    }
    return number;
  }

  DefragPolicyKind read_policy(const node& value, const std::string& path) const {
    const std::optional<DefragPolicyKind> policy =
        Adapter::kind(value) == value_kind::string ? policy_from_name(Adapter::string(value)) : std::nullopt;
    if (!policy) throw_bad_value(value_site(value, path), describe_value(value), policy_problem());
    return *policy;
  }

  std::string read_order(const node& value, const std::string& path) const {
    if (Adapter::kind(value) != value_kind::string)
      throw_bad_value(value_site(value, path), describe_value(value), order_problem({}));
    std::string order = Adapter::string(value);
    if (std::string problem = order_problem(order); !problem.empty())
      throw_bad_value(value_site(value, path), describe_value(value), problem);
    return order;
  }

  // k2 is an integer count, or a string holding a count or a percentage.
  MassThreshold read_mass_threshold(const node& value, const std::string& path) const {
    const error_site site = value_site(value, path);
    switch (Adapter::kind(value)) {
      case value_kind::integer: {
        const long long count = Adapter::integer(value);
        if (count < mass_count_range.minimum)
          throw_bad_value(site, std::to_string(count), "a candidate count must be at least 1");
        return {static_cast<double>(count), false};
      }
      case value_kind::string: {
        const text_reading<MassThreshold> threshold = mass_threshold_from_text(Adapter::string(value));
        if (!threshold.value) throw_bad_value(site, describe_value(value), threshold.problem);
        return *threshold.value;
      }
      case value_kind::integer_out_of_range:
        throw_bad_value(site, Adapter::as_written(value), integer_out_of_range_problem);
      default:
        throw_bad_value(site, describe_value(value),
                        "expected a candidate count like 5000 or a percentage string like \"2.5%\", got " +
                            std::string(kind_in_words(Adapter::kind(value))));
    }
  }

  // A share of the runtime: a number (0.02) or a string ("2%").
  double read_auto_budget(const node& value, const std::string& path) const {
    const value_kind kind = Adapter::kind(value);
    const bool number = kind == value_kind::floating_point || kind == value_kind::integer;
    if (!number && kind != value_kind::string)
      throw_bad_value(value_site(value, path), describe_value(value), "expected a share like 0.02 or \"2%\"");
    const text_reading<double> budget =
        auto_budget_from_text(number ? Adapter::as_written(value) : Adapter::string(value));
    if (!budget.value) throw_bad_value(value_site(value, path), describe_value(value), budget.problem);
    return *budget.value;
  }

  // A switch: a boolean, never a string or a number (types are not converted).
  bool read_boolean(const node& value, const std::string& path) const {
    const value_kind kind = Adapter::kind(value);
    if (kind != value_kind::boolean) {
      throw_bad_value(value_site(value, path), describe_value(value),
                      "expected a boolean (true or false), got " + std::string(kind_in_words(kind)));
    }
    return Adapter::boolean(value);
  }

  void read_defrag_table(const std::string& defrag_key, const node& defrag) {
    const std::string defrag_path = append_key({}, defrag_key);
    require_table(defrag, defrag_path, "defragmentation settings");
    Adapter::for_each_member(defrag, [&](const std::string& key, source_position key_position, const node& value) {
      const std::string path = append_key(defrag_path, key);
      if (key == policy_key) {
        config_.policy = read_policy(value, path);
      } else if (key == factor_key) {
        config_.factor = static_cast<int>(read_integer(value, path, factor_range));
        global_factor_site_ = value_site(value, path);
      } else if (key == retained_candidates_key) {
        config_.retained_candidates = read_integer(value, path, retained_candidates_range);
      } else if (key == min_compactions_key) {
        config_.min_compactions = read_integer(value, path, min_compactions_range);
      } else if (key == every_key) {
        config_.every = read_integer(value, path, every_range);
      } else if (key == mass_threshold_key) {
        config_.mass_threshold = read_mass_threshold(value, path);
      } else if (key == auto_budget_key) {
        config_.auto_budget = read_auto_budget(value, path);
      } else if (key == locality_window_key) {
        config_.locality_window = read_integer(value, path, locality_window_range);
      } else if (key == release_memory_key) {
        config_.release_memory = read_boolean(value, path);
      } else if (key == map_fresh_blocks_key) {
        config_.map_fresh_blocks = read_boolean(value, path);
      } else if (key == classes_key) {
        read_classes_table(value, path);
      } else {
        reject_unknown_key(key, key_position, defrag_path, defrag_table_keys());
      }
    });
  }

  void read_classes_table(const node& classes, const std::string& classes_path) {
    require_table(classes, classes_path, "classes");
    Adapter::for_each_member(classes, [&](const std::string& class_name, source_position class_position,
                                          const node& class_table) {
      const std::string class_path = append_key(classes_path, class_name);
      if (!find_class(classes_, class_name)) {
        throw_bad_key({describe_origin(source_name_, class_position), class_path},
                      "unknown class " + in_quotes(class_name) + "; classes managed by this heap: " + names_of(classes_));
      }
      require_table(class_table, class_path, "per-class settings");
      DefragClassSettings& settings = config_.classes[class_name];
      Adapter::for_each_member(class_table, [&](const std::string& key, source_position key_position,
                                                const node& value) {
        const std::string path = append_key(class_path, key);
        if (key == factor_key) {
          settings.factor = static_cast<int>(read_integer(value, path, factor_range));
          class_factor_sites_[class_name] = value_site(value, path);
        } else if (key == retained_candidates_key) {
          settings.retained_candidates = read_integer(value, path, retained_candidates_range);
        } else if (key == min_compactions_key) {
          settings.min_compactions = read_integer(value, path, min_compactions_range);
        } else if (key == locality_window_key) {
          settings.locality_window = read_integer(value, path, locality_window_range);
        } else if (key == order_key) {
          settings.order = read_order(value, path);
        } else {
          reject_unknown_key(key, key_position, class_path, class_table_keys());
        }
      });
    });
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

}  // namespace soaheap::detail
