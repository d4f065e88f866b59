#pragma once
// ERA's knobs. Defaults are the project's decisions (../shared/reference/era.md, table at the
// top; configs/era.json holds the same values); every alternative stays switchable.
#include <string>
#include <vector>

namespace era {

enum class SaliencySource { kLogits, kProbs };  // A = pre-softmax CLS logits (default) or probabilities
enum class SaliencyReadout { kCls, kMean };     // CLS query row (default) or mean over patch-query rows
enum class FeatureSpace { kProjected, kVision };  // x for DEP/BTR: projector outputs (default) or CLIP features
enum class MatchSpace { kX, kZ };               // BTR anchor matching: cosine on x (default) or on dual-view z
enum class LarSchedule { kAllLayers, kEarlyLayers, kLinearDecay };
enum class LarPath { kAugmented, kAdditiveMask };  // how the decoder applies log b (same maths)

struct EraOptions {
  // DEP
  float alpha = 0.5f;    // weight of the head-saliency view y in z = normalize([x^; alpha*y])
  float eta = 0.1f;      // entropy penalty in the greedy score
  float epsilon = 1e-8f; // in log(y + eps) and in the min-max denominator
  SaliencySource saliency_source = SaliencySource::kLogits;
  SaliencyReadout readout = SaliencyReadout::kCls;
  FeatureSpace feature_space = FeatureSpace::kProjected;
  bool normalized_entropy_penalty = true;  // greedy penalty uses min-max e^ (default) or raw e
  bool use_diversity = true;  // DEP(x): the visual view x takes part in z
  bool use_saliency = true;   // DEP(y): the head view y takes part in z, and the entropy penalty
  // BTR
  bool recycle = true;        // merge pruned tokens into anchors (centroids); off = plain pruning
  MatchSpace match_space = MatchSpace::kX;
  float lambda = 0.3f;        // w_u = lambda + (1 - lambda) * (1 - e^_u)
  // LAR
  bool rectify = true;        // feed log b_k to the decoder; off = bias 0
  LarSchedule lar_schedule = LarSchedule::kAllLayers;
  int lar_early_layers = 3;   // for kEarlyLayers: layers 0..n-1
  LarPath lar_path = LarPath::kAugmented;
};

// The variant names apply_era_variant knows, in the paper's table order.
const std::vector<std::string>& era_variant_names();

// Applies a named ablation variant of the paper's module table on top of `base`:
//   "era" (DEP(x)+DEP(y)+BTR+LAR), "dep-x", "dep-y", "dep" (= DEP(x)+DEP(y)), "dep+btr" (no LAR).
// Throws era::Error(kInvalidArgument) for an unknown name.
EraOptions apply_era_variant(EraOptions base, const std::string& variant);

// Reads options from a JSON file shaped like configs/era.json (missing keys keep `base`'s value).
EraOptions load_era_options(const std::string& path, EraOptions base = {});

// Sets one option from "key=value" (the JSON key names), e.g. "alpha=0.3", "lar_schedule=early".
void set_era_option(EraOptions& options, const std::string& key_equals_value);

// Throws era::Error(kInvalidArgument) if a value is out of range (the same checks as loading) or if
// DEP has no view left (use_diversity and use_saliency both off).
void validate_era_options(const EraOptions& options);

// The options as a JSON object with the config file's keys and value spellings (indent < 0: one
// line). Loading that text back gives the same options.
std::string era_options_json(const EraOptions& options, int indent = -1);

// Per-layer multipliers of log b for a decoder with `num_layers` layers under `options`
// (all ones, ones then zeros, or linear decay 1 - l/L); all zeros when rectify is off.
std::vector<float> lar_layer_scales(const EraOptions& options, int num_layers);

}  // namespace era
