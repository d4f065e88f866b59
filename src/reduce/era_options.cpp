// ERA's options (era/options.h) through one field table: the config file, --era-set, validation
// and the JSON output.
#include <fstream>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "era/options.h"
#include "util/field_table.h"
#include "util/input_file.h"

namespace era {
namespace {

using namespace fields;

// In EraOptions' declaration order.
const FieldTable<EraOptions>& era_option_table() {
  static const FieldTable<EraOptions> t(
      "option",
      {
          number("alpha", &EraOptions::alpha, 0.0),
          number("eta", &EraOptions::eta, 0.0),
          number("epsilon", &EraOptions::epsilon, 0.0, 1.0, /*open_low=*/true),
          choice<EraOptions, SaliencySource>("saliency_source", &EraOptions::saliency_source,
                                             {{SaliencySource::kLogits, "logits"}, {SaliencySource::kProbs, "probs"}}),
          choice<EraOptions, SaliencyReadout>("readout", &EraOptions::readout,
                                              {{SaliencyReadout::kCls, "cls"}, {SaliencyReadout::kMean, "mean"}}),
          choice<EraOptions, FeatureSpace>("feature_space", &EraOptions::feature_space,
                                           {{FeatureSpace::kProjected, "projected"}, {FeatureSpace::kVision, "vision"}}),
          boolean("normalized_entropy_penalty", &EraOptions::normalized_entropy_penalty),
          boolean("use_diversity", &EraOptions::use_diversity),
          boolean("use_saliency", &EraOptions::use_saliency),
          boolean("recycle", &EraOptions::recycle),
          choice<EraOptions, MatchSpace>("match_space", &EraOptions::match_space, {{MatchSpace::kX, "x"}, {MatchSpace::kZ, "z"}}),
          number("lambda", &EraOptions::lambda, 0.0, 1.0),
          boolean("rectify", &EraOptions::rectify),
          choice<EraOptions, LarSchedule>(
              "lar_schedule", &EraOptions::lar_schedule,
              {{LarSchedule::kAllLayers, "all"}, {LarSchedule::kEarlyLayers, "early"}, {LarSchedule::kLinearDecay, "linear"}}),
          integer("lar_early_layers", &EraOptions::lar_early_layers, 0, 1000000),
          choice<EraOptions, LarPath>("lar_path", &EraOptions::lar_path,
                                      {{LarPath::kAugmented, "augmented"}, {LarPath::kAdditiveMask, "mask"}}),
      });
  return t;
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
  // A folder, a FIFO or a device given as the file: refused by name, never read (or waited on).
  const std::string text = read_input_file(path, "ERA config", uint64_t{1} << 20);
  const std::string where = "ERA config " + path + ": ";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, where + "invalid JSON (" + e.what() + ")");
  }
  era_option_table().set_object(base, j, where);
  return base;
}

void set_era_option(EraOptions& options, const std::string& key_equals_value) {
  era_option_table().set_text(options, key_equals_value, "ERA option");
}

void validate_era_options(const EraOptions& options) {
  era_option_table().validate(options, "ERA options: ");
  if (!options.use_diversity && !options.use_saliency) {
    throw Error(ErrorCode::kInvalidArgument, "ERA options: use_diversity and use_saliency cannot both be off");
  }
}

std::string era_options_json(const EraOptions& options, int indent) { return era_option_table().json(options, indent); }

}  // namespace era
