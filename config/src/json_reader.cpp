/// @file
/// @brief parse_defrag_config_json(): nlohmann-json parses, schema_reader
///        walks nlohmann's own tree.

#include "schema_reader.hpp"

#include <soaheap/config/defrag_config.hpp>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace soaheap {
namespace detail {
namespace {

using json = nlohmann::json;

/// @brief schema_reader's view of a nlohmann::json value. nlohmann keeps no
///        positions for values, so messages name the file and the key only.
struct json_adapter {
  using node = json;

  static value_kind kind(const node& value) {
    switch (value.type()) {
      case json::value_t::object: return value_kind::table;
      case json::value_t::array: return value_kind::array;
      case json::value_t::string: return value_kind::string;
      case json::value_t::number_integer: return value_kind::integer;
      case json::value_t::number_unsigned:
        return value.get<json::number_unsigned_t>() >
                       static_cast<json::number_unsigned_t>(std::numeric_limits<long long>::max())
                   ? value_kind::integer_out_of_range
                   : value_kind::integer;
      case json::value_t::number_float: return value_kind::floating_point;
      case json::value_t::boolean: return value_kind::boolean;
      default: return value_kind::other;  // null, binary
    }
  }
  static long long integer(const node& value) { return value.get<long long>(); }
  static std::string string(const node& value) { return value.get<std::string>(); }
  static bool boolean(const node& value) { return value.get<bool>(); }
  static std::string as_written(const node& value) { return value.dump(); }
  static source_position position(const node&) { return {}; }
  template <class Function>
  static void for_each_member(const node& object, Function&& function) {
    for (const auto& [key, value] : object.items()) function(key, source_position{}, value);
  }
};

/// @brief Rejects duplicate keys while nlohmann parses: its tree silently
///        keeps the last one, which would turn a copy-paste mistake in a
///        configuration file into a silently chosen value.
class duplicate_key_check {
 public:
  explicit duplicate_key_check(std::string_view source_name) : source_name_(source_name) {}

  bool operator()(int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        paths_.push_back(open_.empty() ? std::string() : append_key(paths_.back(), pending_key_));
        open_.emplace_back();
        break;
      case json::parse_event_t::array_start:  // arrays hold no keys, but keep the stacks aligned
        paths_.push_back(open_.empty() ? std::string() : append_key(paths_.back(), pending_key_));
        open_.emplace_back();
        break;
      case json::parse_event_t::key:
        pending_key_ = parsed.get<std::string>();
        if (!open_.back().insert(pending_key_).second) {
          throw config_error(source_name_ + ": invalid JSON: duplicate key " + append_key(paths_.back(), pending_key_),
                             append_key(paths_.back(), pending_key_));
        }
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open_.pop_back();
        paths_.pop_back();
        break;
      case json::parse_event_t::value: break;
    }
    return true;
  }

 private:
  std::string source_name_;
  std::vector<std::set<std::string>> open_;
  std::vector<std::string> paths_;
  std::string pending_key_;
};

}  // namespace
}  // namespace detail

DefragConfig parse_defrag_config_json(std::string_view text, const std::vector<ClassInfo>& classes,
                                      std::string_view source_name) {
  detail::json document;
  try {
    document = detail::json::parse(text.begin(), text.end(), detail::duplicate_key_check(source_name),
                                   /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const detail::json::parse_error& error) {
    // nlohmann's message reads "[json.exception.parse_error.101] parse error at line L, column C: ...";
    // keep the human part, which has the position.
    std::string_view message = error.what();
    if (const auto tag_end = message.find("] "); tag_end != std::string_view::npos) message.remove_prefix(tag_end + 2);
    throw config_error(std::string(source_name) + ": invalid JSON: " + std::string(message));
  }
  return detail::schema_reader<detail::json_adapter>(source_name, classes).read(document);
}

}  // namespace soaheap
