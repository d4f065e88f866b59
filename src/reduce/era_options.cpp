#include "reduce/era_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "era/error.h"

namespace era {
namespace {

using Json = nlohmann::json;

// One option: its config key, how to set it from a JSON value (throws std::invalid_argument with a
// "expected ..." message for a bad value) and how to write it back. The config file, --set and
// the --json output all go through this one table, so they cannot disagree on names or spellings.
struct Field {
  const char* name;
  std::function<void(EraOptions&, const Json&)> set;
  std::function<Json(const EraOptions&)> get;
};

// The shortest decimal that reads back as the same float (0.1f prints as 0.1, not 0.100000001).
double tidy(float value) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

// A float in [lo, hi], or in (lo, hi] when `open_low` (epsilon must stay above 0).
Field float_field(const char* name, float EraOptions::*member, double lo, double hi = INFINITY, bool open_low = false) {
  std::ostringstream range;
  if (std::isinf(hi)) {
    range << ">= " << lo;
  } else {
    range << "in " << (open_low ? "(" : "[") << lo << ", " << hi << "]";
  }
  const std::string want = "expected a number " + range.str();
  return {name,
          [=](EraOptions& o, const Json& v) {
            if (!v.is_number()) throw std::invalid_argument(want);
            const double d = v.get<double>();
            const float f = static_cast<float>(d);
            const bool ok = std::isfinite(f) && (open_low ? d > lo : d >= lo) && d <= hi;
            if (!ok) throw std::invalid_argument(want);
            o.*member = f;
          },
          [=](const EraOptions& o) { return Json(tidy(o.*member)); }};
}

Field bool_field(const char* name, bool EraOptions::*member) {
  return {name,
          [=](EraOptions& o, const Json& v) {
            if (!v.is_boolean()) throw std::invalid_argument("expected true or false");
            o.*member = v.get<bool>();
          },
          [=](const EraOptions& o) { return Json(o.*member); }};
}

Field int_field(const char* name, int EraOptions::*member, int lo) {
  return {name,
          [=](EraOptions& o, const Json& v) {
            const std::string want = "expected an integer >= " + std::to_string(lo);
            if (!v.is_number_integer()) throw std::invalid_argument(want);
            const auto i = v.get<int64_t>();
            if (i < lo || i > 1000000) throw std::invalid_argument(want);
            o.*member = static_cast<int>(i);
          },
          [=](const EraOptions& o) { return Json(o.*member); }};
}

template <class E>
Field enum_field(const char* name, E EraOptions::*member, std::vector<std::pair<E, const char*>> spellings) {
  return {name,
          [=](EraOptions& o, const Json& v) {
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
          [=](const EraOptions& o) {
            for (const auto& [value, text] : spellings) {
              if (o.*member == value) return Json(text);
            }
            return Json(nullptr);
          }};
}

// In EraOptions' declaration order.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      float_field("alpha", &EraOptions::alpha, 0.0),
      float_field("eta", &EraOptions::eta, 0.0),
      float_field("epsilon", &EraOptions::epsilon, 0.0, 1.0, true),
      enum_field<SaliencySource>("saliency_source", &EraOptions::saliency_source,
                                 {{SaliencySource::kLogits, "logits"}, {SaliencySource::kProbs, "probs"}}),
      enum_field<SaliencyReadout>("readout", &EraOptions::readout,
                                  {{SaliencyReadout::kCls, "cls"}, {SaliencyReadout::kMean, "mean"}}),
      enum_field<FeatureSpace>("feature_space", &EraOptions::feature_space,
                               {{FeatureSpace::kProjected, "projected"}, {FeatureSpace::kVision, "vision"}}),
      bool_field("normalized_entropy_penalty", &EraOptions::normalized_entropy_penalty),
      bool_field("use_diversity", &EraOptions::use_diversity),
      bool_field("use_saliency", &EraOptions::use_saliency),
      bool_field("recycle", &EraOptions::recycle),
      enum_field<MatchSpace>("match_space", &EraOptions::match_space, {{MatchSpace::kX, "x"}, {MatchSpace::kZ, "z"}}),
      float_field("lambda", &EraOptions::lambda, 0.0, 1.0),
      bool_field("rectify", &EraOptions::rectify),
      enum_field<LarSchedule>("lar_schedule", &EraOptions::lar_schedule,
                              {{LarSchedule::kAllLayers, "all"},
                               {LarSchedule::kEarlyLayers, "early"},
                               {LarSchedule::kLinearDecay, "linear"}}),
      int_field("lar_early_layers", &EraOptions::lar_early_layers, 0),
      enum_field<LarPath>("lar_path", &EraOptions::lar_path,
                          {{LarPath::kAugmented, "augmented"}, {LarPath::kAdditiveMask, "mask"}}),
  };
  return table;
}

const Field& find_field(const std::string& key, const std::string& where) {
  for (const auto& f : fields()) {
    if (key == f.name) return f;
  }
  std::string known;
  for (const auto& f : fields()) known += (known.empty() ? "" : ", ") + std::string(f.name);
  throw Error(ErrorCode::kInvalidArgument, where + "unknown option '" + key + "' (known: " + known + ")");
}

void set_field(EraOptions& options, const std::string& key, const Json& value, const std::string& where) {
  const Field& f = find_field(key, where);
  try {
    f.set(options, value);
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCode::kInvalidArgument, where + "option '" + key + "' = " + value.dump() + ": " + e.what());
  }
}

}  // namespace

const std::vector<std::string>& era_variant_names() {
  static const std::vector<std::string> names = {"dep-x", "dep-y", "dep", "dep+btr", "era"};
  return names;
}

EraOptions apply_era_variant(EraOptions base, const std::string& variant) {
  // Each variant is a row of the paper's module ablation: which DEP views, BTR, LAR.
  auto modules = [&](bool diversity, bool saliency, bool recycle, bool rectify) {
    base.use_diversity = diversity;
    base.use_saliency = saliency;
    base.recycle = recycle;
    base.rectify = rectify;
    return base;
  };
  if (variant == "era") return modules(true, true, true, true);
  if (variant == "dep") return modules(true, true, false, false);
  if (variant == "dep+btr") return modules(true, true, true, false);
  if (variant == "dep-y") return modules(false, true, false, false);
  if (variant == "dep-x") {
    base.eta = 0.0f;  // pure max-min diversity on x (alpha is moot: y is not in z)
    return modules(true, false, false, false);
  }
  std::string known;
  for (const auto& n : era_variant_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorCode::kInvalidArgument, "unknown ERA variant '" + variant + "' (known: " + known + ")");
}

EraOptions load_era_options(const std::string& path, EraOptions base) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kInvalidArgument, "cannot read ERA config " + path);
  const std::string where = "ERA config " + path + ": ";
  Json j;
  try {
    j = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, where + "invalid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, where + "expected a JSON object");
  for (const auto& [key, value] : j.items()) set_field(base, key, value, where);
  return base;
}

void set_era_option(EraOptions& options, const std::string& key_equals_value) {
  const auto eq = key_equals_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error(ErrorCode::kInvalidArgument, "ERA option '" + key_equals_value + "': expected key=value");
  }
  const std::string key = key_equals_value.substr(0, eq), text = key_equals_value.substr(eq + 1);
  // The value is read as a JSON scalar when it is one (0.3, true, 3), else as a bare string (early).
  Json value = text;
  try {
    Json parsed = Json::parse(text);
    if (!parsed.is_structured()) value = std::move(parsed);
  } catch (const Json::exception&) {
  }
  set_field(options, key, value, "--set " + key_equals_value + ": ");
}

void validate_era_options(const EraOptions& options) {
  EraOptions scratch;
  for (const auto& f : fields()) set_field(scratch, f.name, f.get(options), "");
  if (!options.use_diversity && !options.use_saliency) {
    throw Error(ErrorCode::kInvalidArgument, "ERA options: use_diversity and use_saliency cannot both be off");
  }
}

std::string era_options_json(const EraOptions& options, int indent) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : fields()) j[f.name] = f.get(options);
  return j.dump(indent);
}

std::vector<float> lar_layer_scales(const EraOptions& options, int num_layers) {
  std::vector<float> scales(static_cast<size_t>(std::max(num_layers, 0)), 0.0f);
  if (!options.rectify) return scales;
  for (int l = 0; l < num_layers; ++l) {
    switch (options.lar_schedule) {
      case LarSchedule::kAllLayers: scales[l] = 1.0f; break;
      case LarSchedule::kEarlyLayers: scales[l] = l < options.lar_early_layers ? 1.0f : 0.0f; break;
      case LarSchedule::kLinearDecay: scales[l] = 1.0f - static_cast<float>(l) / static_cast<float>(num_layers); break;
    }
  }
  return scales;
}

}  // namespace era
