#pragma once
// One table of named fields for an options struct: how each field is read from a JSON value
// (with its range check), written back, and listed. ERA's and the competing methods' options both
// go through it, so a config file, a "key=value" override, validation and the JSON output cannot
// disagree on names, spellings or ranges.
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "era/error.h"

namespace era {

template <class T>
class FieldTable {
 public:
  using Json = nlohmann::json;
  struct Field {
    std::string name;
    // Throws std::invalid_argument("expected ...") for a value of the wrong type or range.
    std::function<void(T&, const Json&)> set;
    std::function<Json(const T&)> get;
  };

  // `what` names the options in messages ("ERA option", "method option").
  FieldTable(std::string what, std::vector<Field> fields) : what_(std::move(what)), fields_(std::move(fields)) {}

  const std::vector<Field>& fields() const { return fields_; }

  std::string known() const {
    std::string names;
    for (const auto& f : fields_) names += (names.empty() ? "" : ", ") + f.name;
    return names;
  }

  // Throws era::Error(kInvalidArgument) "<where>unknown <what> '<key>' (known: ...)" or
  // "<where><what> '<key>' = <value>: expected ...".
  void set(T& options, const std::string& key, const Json& value, const std::string& where = "") const {
    for (const auto& f : fields_) {
      if (f.name != key) continue;
      try {
        f.set(options, value);
      } catch (const std::invalid_argument& e) {
        throw Error(ErrorCode::kInvalidArgument, where + what_ + " '" + key + "' = " + value.dump() + ": " + e.what());
      }
      return;
    }
    throw Error(ErrorCode::kInvalidArgument, where + "unknown " + what_ + " '" + key + "' (known: " + known() + ")");
  }

  // "key=value": the value is read as a JSON scalar when it is one (0.3, true, 3), else as a bare
  // string (early). `what` starts the messages ("ERA option alpha=x: ...").
  void set_text(T& options, const std::string& key_equals_value, const std::string& what) const {
    const auto eq = key_equals_value.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::kInvalidArgument, what + " " + key_equals_value + ": expected key=value");
    }
    const std::string key = key_equals_value.substr(0, eq), text = key_equals_value.substr(eq + 1);
    Json value = text;
    try {
      Json parsed = Json::parse(text);
      if (!parsed.is_structured()) value = std::move(parsed);
    } catch (const Json::exception&) {
    }
    set(options, key, value, what + " " + key_equals_value + ": ");
  }

  // Every key of a JSON object; missing keys keep their value.
  void set_object(T& options, const Json& object, const std::string& where) const {
    if (!object.is_object()) throw Error(ErrorCode::kInvalidArgument, where + "expected a JSON object");
    for (const auto& [key, value] : object.items()) set(options, key, value, where);
  }

  // Re-reads every field through its setter: the same range checks as loading.
  void validate(const T& options, const std::string& where = "") const {
    T scratch = options;
    for (const auto& f : fields_) set(scratch, f.name, f.get(options), where);
  }

  std::string json(const T& options, int indent) const {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& f : fields_) j[f.name] = f.get(options);
    return j.dump(indent);
  }

 private:
  std::string what_;
  std::vector<Field> fields_;
};

// ---- field builders ---------------------------------------------------------------------------
namespace fields {

using Json = nlohmann::json;

// The shortest decimal that reads back as the same float (0.1f prints as 0.1, not 0.100000001).
inline double tidy(float value) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

// A floating-point number in [lo, hi], or (lo, hi] when `open_low`.
template <class T, class F>
typename FieldTable<T>::Field number(const char* name, F T::*member, double lo, double hi = INFINITY, bool open_low = false,
                                     bool open_high = false) {
  std::ostringstream range;
  if (std::isinf(hi)) {
    range << (open_low ? "> " : ">= ") << lo;
  } else {
    range << "in " << (open_low ? "(" : "[") << lo << ", " << hi << (open_high ? ")" : "]");
  }
  const std::string want = "expected a number " + range.str();
  return {name,
          [=](T& o, const Json& v) {
            if (!v.is_number()) throw std::invalid_argument(want);
            const double d = v.get<double>();
            const F f = static_cast<F>(d);
            const bool ok = std::isfinite(f) && (open_low ? d > lo : d >= lo) && (open_high ? d < hi : d <= hi);
            if (!ok) throw std::invalid_argument(want);
            o.*member = f;
          },
          [=](const T& o) {
            if constexpr (std::is_same_v<F, float>) return Json(tidy(o.*member));
            else return Json(o.*member);
          }};
}

// An integer in [lo, hi].
template <class T, class I>
typename FieldTable<T>::Field integer(const char* name, I T::*member, int64_t lo, int64_t hi) {
  const std::string want = "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {name,
          [=](T& o, const Json& v) {
            if (!v.is_number_integer()) throw std::invalid_argument(want);
            // Unsigned JSON numbers above INT64_MAX do not fit any field here.
            if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) throw std::invalid_argument(want);
            const auto i = v.get<int64_t>();
            if (i < lo || i > hi) throw std::invalid_argument(want);
            o.*member = static_cast<I>(i);
          },
          [=](const T& o) { return Json(o.*member); }};
}

// true / false; with `one_zero` also 1 / 0 (the competing methods' options have always taken
// them; ERA's config keeps JSON booleans strict).
template <class T>
typename FieldTable<T>::Field boolean(const char* name, bool T::*member, bool one_zero = false) {
  return {name,
          [=](T& o, const Json& v) {
            if (v.is_boolean()) {
              o.*member = v.get<bool>();
            } else if (one_zero && v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
              o.*member = v.get<int64_t>() == 1;
            } else {
              throw std::invalid_argument(one_zero ? "expected true/false or 1/0" : "expected true or false");
            }
          },
          [=](const T& o) { return Json(o.*member); }};
}

// One of a fixed set of spellings.
template <class T, class E>
typename FieldTable<T>::Field choice(const char* name, E T::*member, std::vector<std::pair<E, const char*>> spellings) {
  return {name,
          [=](T& o, const Json& v) {
            std::string want = "expected one of:";
            for (const auto& [value, text] : spellings) {
              if (v.is_string() && v.get<std::string>() == text) {
                o.*member = value;
                return;
              }
              want += std::string(" ") + text;
            }
            throw std::invalid_argument(want);
          },
          [=](const T& o) {
            for (const auto& [value, text] : spellings) {
              if (o.*member == value) return Json(text);
            }
            return Json(nullptr);
          }};
}

}  // namespace fields
}  // namespace era
