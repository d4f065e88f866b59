#include "model/manifest_fields.h"

#include <cmath>
#include <utility>

#include "era/error.h"

namespace era {

using nlohmann::json;

namespace {

std::string range_rule(int64_t lo, int64_t hi) {
  return "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

std::string shown_json(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

ManifestFields::ManifestFields(const json& root, std::string where) : root_(root), where_(std::move(where)) {}

const json* ManifestFields::find(const std::string& dotted) const {
  const json* node = &root_;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

const json& ManifestFields::at(const std::string& dotted) const {
  const json* node = find(dotted);
  if (!node) throw Error(ErrorCode::kBundle, where_ + ": missing field '" + dotted + "'");
  return *node;
}

void ManifestFields::bad(const std::string& dotted, const json& value, const std::string& rule) const {
  throw Error(ErrorCode::kBundle, where_ + ": " + dotted + " = " + shown_json(value) + ": " + rule);
}

void ManifestFields::require(bool ok, const std::string& what) const {
  if (!ok) throw Error(ErrorCode::kBundle, where_ + ": " + what);
}

int64_t ManifestFields::integer_value(const json& v, const std::string& dotted, int64_t lo, int64_t hi) const {
  // nlohmann's conversion of 1e31 to an integer is undefined: only integers that fit are read
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    bad(dotted, v, range_rule(lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(dotted, v, range_rule(lo, hi));
  return x;
}

int64_t ManifestFields::integer(const std::string& dotted, int64_t lo, int64_t hi) const {
  return integer_value(at(dotted), dotted, lo, hi);
}

int64_t ManifestFields::integer_or(const std::string& dotted, int64_t lo, int64_t hi, int64_t fallback) const {
  const json* node = find(dotted);
  return node ? integer_value(*node, dotted, lo, hi) : fallback;
}

std::vector<int64_t> ManifestFields::integers(const json& v, const std::string& dotted, int64_t lo, int64_t hi,
                                              size_t max_items) const {
  if (!v.is_array() || v.empty() || v.size() > max_items)
    bad(dotted, v, "must be a list of 1 to " + std::to_string(max_items) + " integers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(integer_value(v[i], dotted + "[" + std::to_string(i) + "]", lo, hi));
  return out;
}

std::string ManifestFields::text(const std::string& dotted) const {
  const json& v = at(dotted);
  if (!v.is_string()) bad(dotted, v, "must be a string");
  return v.get<std::string>();
}

std::string ManifestFields::text_or(const std::string& dotted, const std::string& fallback) const {
  return find(dotted) ? text(dotted) : fallback;
}

bool ManifestFields::flag_or(const std::string& dotted, bool fallback) const {
  const json* node = find(dotted);
  if (!node) return fallback;
  require(node->is_boolean(), dotted + " must be true or false");
  return node->get<bool>();
}

double ManifestFields::positive_number_or(const std::string& dotted, double hi, double fallback) const {
  const json* node = find(dotted);
  if (!node) return fallback;
  if (!node->is_number() || !std::isfinite(node->get<double>()) || !(node->get<double>() > 0) || node->get<double>() > hi)
    bad(dotted, *node, "must be a number above 0 and at most " + shown_json(json(hi)));
  return node->get<double>();
}

std::array<float, 3> ManifestFields::three_numbers(const std::string& dotted, const std::function<bool(double)>& ok,
                                                   const std::string& rule) const {
  const json& v = at(dotted);
  if (!v.is_array() || v.size() != 3) bad(dotted, v, "must be a list of 3 numbers");
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string item = dotted + "[" + std::to_string(i) + "]";
    if (!v[i].is_number()) bad(item, v[i], "must be a number");
    const double x = v[i].get<double>();
    if (!std::isfinite(x) || std::fabs(x) > 1e6 || !ok(x)) bad(item, v[i], rule);
    out[i] = static_cast<float>(x);
  }
  return out;
}

std::array<float, 3> ManifestFields::channel_means(const std::string& dotted) const {
  return three_numbers(
      dotted, [](double) { return true; }, "must be a finite number");
}

std::array<float, 3> ManifestFields::channel_stds(const std::string& dotted) const {
  return three_numbers(
      dotted, [](double x) { return x >= 1e-6; }, "must be a finite number of at least 1e-6 (pixels are divided by it)");
}

}  // namespace era
