#include "reduce/baseline_options.h"

#include <functional>
#include <map>
#include <stdexcept>

#include "era/error.h"

namespace era {
namespace {

using Setter = std::function<void(BaselineOptions&, const std::string&)>;

int64_t parse_int(const std::string& key, const std::string& v) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw Error(ErrorCode::kInvalidArgument, "method option " + key + ": '" + v + "' is not an integer");
  return x;
}

double parse_double(const std::string& key, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw Error(ErrorCode::kInvalidArgument, "method option " + key + ": '" + v + "' is not a number");
  return x;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw Error(ErrorCode::kInvalidArgument, "method option " + key + ": '" + v + "' is not true/false");
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"random_seed", [](BaselineOptions& o, const std::string& v) { o.random_seed = static_cast<uint64_t>(parse_int("random_seed", v)); }},
      {"visionzip_contextual_fraction",
       [](BaselineOptions& o, const std::string& v) {
         const double f = parse_double("visionzip_contextual_fraction", v);
         if (!(f >= 0.0 && f < 1.0)) throw Error(ErrorCode::kInvalidArgument, "method option visionzip_contextual_fraction must be in [0, 1)");
         o.visionzip_contextual_fraction = f;
       }},
      {"cdpruner_negate_relevance",
       [](BaselineOptions& o, const std::string& v) { o.cdpruner_negate_relevance = parse_bool("cdpruner_negate_relevance", v); }},
      {"fastv_layer", [](BaselineOptions& o, const std::string& v) { o.fastv_layer = parse_int("fastv_layer", v); }},
      {"dart_layer", [](BaselineOptions& o, const std::string& v) { o.dart_layer = parse_int("dart_layer", v); }},
      {"dart_image_pivots", [](BaselineOptions& o, const std::string& v) { o.dart_image_pivots = parse_int("dart_image_pivots", v); }},
      {"dart_exact_budget",
       [](BaselineOptions& o, const std::string& v) {
         if (v == "true" || v == "1") {
           o.dart_exact_budget = true;
         } else if (v == "false" || v == "0") {
           o.dart_exact_budget = false;
         } else {
           throw Error(ErrorCode::kInvalidArgument, "method option dart_exact_budget: '" + v + "' is not true/false/1/0");
         }
       }},
      {"dart_text_pivots", [](BaselineOptions& o, const std::string& v) { o.dart_text_pivots = parse_int("dart_text_pivots", v); }},
  };
  return table;
}

}  // namespace

void set_baseline_option(BaselineOptions& options, const std::string& key_value) {
  const auto eq = key_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error(ErrorCode::kInvalidArgument, "method option '" + key_value + "' must be key=value");
  }
  const std::string key = key_value.substr(0, eq);
  const auto it = setters().find(key);
  if (it == setters().end()) {
    std::string known;
    for (const auto& kv : setters()) known += (known.empty() ? "" : ", ") + kv.first;
    throw Error(ErrorCode::kInvalidArgument, "unknown method option '" + key + "' (known: " + known + ")");
  }
  it->second(options, key_value.substr(eq + 1));
}

}  // namespace era
