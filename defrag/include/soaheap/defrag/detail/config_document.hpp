#pragma once
/// @file
/// @brief A format-neutral tree for configuration documents, built from TOML
///        (toml++) or JSON (nlohmann::json).
///
/// Both formats are parsed by their libraries and then copied into the same
/// small tree, so that one schema reader (in defrag_config.hpp) checks keys,
/// types and ranges identically for both. Implementation detail of
/// <soaheap/defrag/defrag_config.hpp>.

#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config_text.hpp"

// SOAHEAP_DEFRAG_CONFIG_TOML says whether TOML support is compiled in. nvcc's
// front end (cudafe++; seen with CUDA 11 to 13) turns a generic lambda inside
// toml++'s table.h into host code that does not compile, so CUDA sources
// compiled by nvcc do not include toml++ at all; JSON, environment variables
// and everything else still work there, and host-compiled .cpp files have
// TOML. Define the macro to 0 or 1 to override the choice.
#ifndef SOAHEAP_DEFRAG_CONFIG_TOML
#if defined(__NVCC__) && defined(__CUDACC__)
#define SOAHEAP_DEFRAG_CONFIG_TOML 0
#else
#define SOAHEAP_DEFRAG_CONFIG_TOML 1
#endif
#endif

#if SOAHEAP_DEFRAG_CONFIG_TOML
// toml++ is used header-only unless the including project has chosen the
// compiled library (Debian's CMake package sets TOML_HEADER_ONLY=0 itself).
#ifndef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 1
#endif
#ifndef TOML_EXCEPTIONS
#define TOML_EXCEPTIONS 1
#endif
#include <toml++/toml.h>
static_assert(TOML_EXCEPTIONS, "soaheap's configuration reader relies on toml++ reporting syntax errors as exceptions");
#endif

namespace soaheap::detail {

/// @brief A 1-based line and column in a document; 0 means unknown.
///
/// toml++ records a position for every key and value; nlohmann::json reports
/// positions only for syntax errors, so JSON values carry no position.
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

struct config_member;

/// @brief One value of a parsed configuration document.
struct config_node {
  enum class kind {
    table,  ///< TOML table or JSON object
    array,
    string,
    integer,
    integer_out_of_range,  ///< a JSON integer beyond the signed 64-bit range
    floating_point,
    boolean,
    other,  ///< JSON null, TOML date/time
  };

  kind type = kind::table;
  long long integer = 0;  ///< valid when type == integer
  std::string text;       ///< strings: the content; other scalars: the value as written
  source_position position;
  std::vector<config_member> members;  ///< tables: keys in document order; arrays: elements keyed by index
};

/// @brief One key of a table (or element of an array) and its value.
struct config_member {
  std::string key;
  source_position key_position;
  config_node value;
};

/// @brief The kind of a value in words, for "expected X, got Y" messages.
inline std::string_view kind_in_words(config_node::kind type) {
  switch (type) {
    case config_node::kind::table: return "a table";
    case config_node::kind::array: return "an array";
    case config_node::kind::string: return "a string";
    case config_node::kind::integer:
    case config_node::kind::integer_out_of_range: return "an integer";
    case config_node::kind::floating_point: return "a floating-point number";
    case config_node::kind::boolean: return "a boolean";
    case config_node::kind::other: break;
  }
  return "a value of another type";
}

/// @brief How a value is shown in error messages: strings quoted, containers
///        by kind (printing a whole table would bury the point).
inline std::string describe_value(const config_node& node) {
  switch (node.type) {
    case config_node::kind::string: return in_quotes(node.text);
    case config_node::kind::table:
    case config_node::kind::array: return std::string(kind_in_words(node.type));
    default: return node.text;
  }
}

/// @brief A parsed document, or the syntax error that prevented parsing.
struct parsed_document {
  config_node root;
  std::string syntax_error;  ///< complete message naming the source and position; empty on success
};

// ---------------------------------------------------------------------------
// TOML

#if SOAHEAP_DEFRAG_CONFIG_TOML

inline source_position position_of(const toml::source_region& region) {
  return {region.begin.line, region.begin.column};
}

inline config_node node_from_toml(const toml::node& node) {
  config_node out;
  out.position = position_of(node.source());
  switch (node.type()) {
    case toml::node_type::table:
      out.type = config_node::kind::table;
      for (const auto& [key, value] : *node.as_table()) {
        out.members.push_back({std::string(key.str()), position_of(key.source()), node_from_toml(value)});
      }
      break;
    case toml::node_type::array: {
      out.type = config_node::kind::array;
      std::size_t index = 0;
      for (const toml::node& element : *node.as_array()) {
        out.members.push_back({std::to_string(index++), position_of(element.source()), node_from_toml(element)});
      }
      break;
    }
    case toml::node_type::string:
      out.type = config_node::kind::string;
      out.text = node.as_string()->get();
      break;
    case toml::node_type::integer:
      out.type = config_node::kind::integer;
      out.integer = node.as_integer()->get();
      out.text = std::to_string(out.integer);
      break;
    case toml::node_type::floating_point:
      out.type = config_node::kind::floating_point;
      out.text = format_decimal(node.as_floating_point()->get());
      break;
    case toml::node_type::boolean:
      out.type = config_node::kind::boolean;
      out.text = node.as_boolean()->get() ? "true" : "false";
      break;
    default: {  // dates and times: no key accepts them, but show them as written
      out.type = config_node::kind::other;
      std::ostringstream shown;
      if (const auto* date = node.as_date()) shown << date->get();
      if (const auto* time = node.as_time()) shown << time->get();
      if (const auto* date_time = node.as_date_time()) shown << date_time->get();
      out.text = shown.str();
      break;
    }
  }
  return out;
}

/// @brief Parses TOML text with toml++ into a neutral tree.
inline parsed_document parse_toml_document(std::string_view text, std::string_view source_name) {
  try {
    const toml::table table = toml::parse(text, source_name);
    return {node_from_toml(table), {}};
  } catch (const toml::parse_error& error) {
    return {{},
            describe_origin(source_name, position_of(error.source())) +
                ": invalid TOML: " + std::string(error.description())};
  }
}

#endif  // SOAHEAP_DEFRAG_CONFIG_TOML

// ---------------------------------------------------------------------------
// JSON

/// @brief Receives nlohmann::json's SAX events and builds a config_node tree.
///
/// Using the event interface rather than nlohmann's DOM lets us reject
/// duplicate keys: the DOM silently keeps the last one, which would turn a
/// copy-paste mistake in a configuration file into a silently chosen value.
class json_document_builder {
 public:
  using json = nlohmann::json;

  explicit json_document_builder(std::string_view source_name) : source_name_(source_name) {}

  bool null() { return add_scalar(config_node::kind::other, "null"); }
  bool boolean(bool value) { return add_scalar(config_node::kind::boolean, value ? "true" : "false"); }

  bool number_integer(json::number_integer_t value) {
    config_node& node = add_value(config_node::kind::integer);
    node.integer = value;
    node.text = std::to_string(value);
    return true;
  }

  bool number_unsigned(json::number_unsigned_t value) {
    if (value > static_cast<json::number_unsigned_t>(std::numeric_limits<long long>::max())) {
      return add_scalar(config_node::kind::integer_out_of_range, std::to_string(value));
    }
    return number_integer(static_cast<json::number_integer_t>(value));
  }

  bool number_float(json::number_float_t, const json::string_t& as_written) {
    return add_scalar(config_node::kind::floating_point, as_written);
  }

  bool string(json::string_t& value) { return add_scalar(config_node::kind::string, value); }
  bool binary(json::binary_t&) { return add_scalar(config_node::kind::other, "<binary>"); }

  bool start_object(std::size_t) { return open(config_node::kind::table); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(config_node::kind::array); }
  bool end_array() { return close(); }

  bool key(json::string_t& name) {
    const open_container& container = open_.back();
    for (const config_member& member : container.node->members) {
      if (member.key == name) {
        error_ = source_name_ + ": invalid JSON: duplicate key " + append_key(container.path, name);
        return false;  // stops the parser
      }
    }
    pending_key_ = name;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const json::exception& error) {
    // nlohmann's message reads "[json.exception.parse_error.101] parse error at
    // line L, column C: ..."; keep the human part, which has the position.
    std::string_view message = error.what();
    if (const auto tag_end = message.find("] "); tag_end != std::string_view::npos) message.remove_prefix(tag_end + 2);
    error_ = source_name_ + ": invalid JSON: " + std::string(message);
    return false;
  }

  /// @brief The document, or the reason it could not be built.
  parsed_document result() && { return {std::move(root_), std::move(error_)}; }

 private:
  struct open_container {
    config_node* node;  // stays valid: only the innermost open container's member list grows
    std::string path;
  };

  config_node& add_value(config_node::kind type) {
    if (open_.empty()) {
      root_ = config_node{};
      root_.type = type;
      return root_;
    }
    config_node& parent = *open_.back().node;
    std::string key =
        parent.type == config_node::kind::array ? std::to_string(parent.members.size()) : std::move(pending_key_);
    parent.members.push_back({std::move(key), {}, config_node{}});
    config_node& node = parent.members.back().value;
    node.type = type;
    return node;
  }

  bool add_scalar(config_node::kind type, std::string text) {
    add_value(type).text = std::move(text);
    return true;
  }

  bool open(config_node::kind type) {
    std::string path = open_.empty() ? std::string() : append_key(open_.back().path, current_key());
    config_node& node = add_value(type);
    open_.push_back({&node, std::move(path)});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  std::string current_key() const {
    const config_node& parent = *open_.back().node;
    return parent.type == config_node::kind::array ? std::to_string(parent.members.size()) : pending_key_;
  }

  std::string source_name_;
  config_node root_;
  std::vector<open_container> open_;
  std::string pending_key_;
  std::string error_;
};

/// @brief Parses JSON text with nlohmann::json into a neutral tree.
inline parsed_document parse_json_document(std::string_view text, std::string_view source_name) {
  json_document_builder builder(source_name);
  nlohmann::json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  return std::move(builder).result();
}

}  // namespace soaheap::detail
