// soaheap_app::Result on nlohmann-json (see harness.hpp).
#include "examples/harness/harness.hpp"

#include <nlohmann/json.hpp>

#include <iostream>

namespace soaheap_app {

struct Result::Impl {
  nlohmann::json value = nlohmann::json::object();
};

Result::Result() : impl_(std::make_unique<Impl>()) {}
Result::~Result() = default;
Result::Result(const Result& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Result& Result::operator=(const Result& other) {
  if (this != &other) *impl_ = *other.impl_;
  return *this;
}

void Result::merge(const Result& other) {
  for (const auto& item : other.impl_->value.items()) impl_->value[item.key()] = item.value();
}
bool Result::contains(const std::string& key) const { return impl_->value.contains(key); }
double Result::number(const std::string& key) const {
  const auto found = impl_->value.find(key);
  return found != impl_->value.end() && found->is_number() ? found->get<double>() : 0.0;
}
std::string Result::dump() const { return impl_->value.dump(); }
void Result::print() const { std::cout << dump() << std::endl; }

void Result::set_bool(const std::string& key, bool value) { impl_->value[key] = value; }
void Result::set_integer(const std::string& key, long long value) { impl_->value[key] = value; }
void Result::set_unsigned(const std::string& key, unsigned long long value) { impl_->value[key] = value; }
void Result::set_real(const std::string& key, double value) { impl_->value[key] = value; }
void Result::set_text(const std::string& key, const std::string& value) { impl_->value[key] = value; }
void Result::set_numbers(const std::string& key, const std::vector<unsigned long long>& values) {
  impl_->value[key] = values;
}
void Result::set_reals(const std::string& key, const std::vector<double>& values) { impl_->value[key] = values; }
void Result::set_object(const std::string& key, const Result& value) { impl_->value[key] = value.impl_->value; }
void Result::set_objects(const std::string& key, const std::vector<Result>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (const Result& value : values) list.push_back(value.impl_->value);
  impl_->value[key] = std::move(list);
}

int report_failure(const char* program, const char* what) {
  std::cerr << program << ": error: " << what << std::endl;
  return 2;
}

}  // namespace soaheap_app
