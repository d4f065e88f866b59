#pragma once
// The options of the visual-token reduction methods: ERA's knobs and the competing methods'
// parameters. Both are plain structs with the same four ways in and out, driven by one field
// table per struct inside the library: a JSON file (configs/era.json), single "key=value"
// overrides (--era-set / --method-set), validation, and JSON output with the file's spellings.
// Defaults are the project's decisions (the decision table of the ERA reference notes and each
// method's official code); every alternative stays switchable.
#include <cstdint>
#include <string>
#include <vector>

namespace era {

// ---- ERA ---------------------------------------------------------------------------------------
enum class SaliencySource { kLogits, kProbs };    // A = pre-softmax CLS logits (default) or probabilities
enum class SaliencyReadout { kCls, kMean };       // CLS query row (default) or mean over patch-query rows
enum class FeatureSpace { kProjected, kVision };  // x for DEP/BTR: projector outputs (default) or CLIP features
enum class MatchSpace { kX, kZ };                 // BTR anchor matching: cosine on x (default) or on dual-view z
enum class LarSchedule { kAllLayers, kEarlyLayers, kLinearDecay };
enum class LarPath { kAugmented, kAdditiveMask };  // how the decoder applies log b (same maths)

struct EraOptions {
  // DEP
  float alpha = 0.5f;     // weight of the head-saliency view y in z = normalize([x^; alpha*y])
  float eta = 0.1f;       // entropy penalty in the greedy score
  float epsilon = 1e-8f;  // in log(y + eps) and in the min-max denominator
  SaliencySource saliency_source = SaliencySource::kLogits;
  SaliencyReadout readout = SaliencyReadout::kCls;
  FeatureSpace feature_space = FeatureSpace::kProjected;
  bool normalized_entropy_penalty = true;  // greedy penalty uses min-max e^ (default) or raw e
  bool use_diversity = true;               // DEP(x): the visual view x takes part in z
  bool use_saliency = true;                // DEP(y): the head view y takes part in z, and the entropy penalty
  // BTR
  bool recycle = true;  // merge pruned tokens into anchors (centroids); off = plain pruning
  MatchSpace match_space = MatchSpace::kX;
  float lambda = 0.3f;  // w_u = lambda + (1 - lambda) * (1 - e^_u)
  // LAR
  bool rectify = true;  // feed log b_k to the decoder; off = bias 0
  LarSchedule lar_schedule = LarSchedule::kAllLayers;
  int lar_early_layers = 3;  // for kEarlyLayers: layers 0..n-1
  LarPath lar_path = LarPath::kAugmented;
};

// The ablation variant names of the paper's module table, in its order: "dep-x", "dep-y", "dep",
// "dep+btr", "era". As methods they are spelled "era:<variant>".
const std::vector<std::string>& era_variant_names();

// Applies a named variant on top of `base`:
//   "era" (DEP(x)+DEP(y)+BTR+LAR), "dep-x", "dep-y", "dep" (= DEP(x)+DEP(y)), "dep+btr" (no LAR).
// Throws era::Error(kInvalidArgument) for an unknown name.
EraOptions apply_era_variant(EraOptions base, const std::string& variant);

// Reads options from a JSON file shaped like configs/era.json (missing keys keep `base`'s value).
// Throws era::Error(kInvalidArgument) naming the file and the key.
EraOptions load_era_options(const std::string& path, EraOptions base = {});

// Sets one option from "key=value" (the JSON key names), e.g. "alpha=0.3", "lar_schedule=early".
void set_era_option(EraOptions& options, const std::string& key_equals_value);

// Throws era::Error(kInvalidArgument) if a value is out of range (the same checks as loading) or
// if DEP has no view left (use_diversity and use_saliency both off).
void validate_era_options(const EraOptions& options);

// The options as a JSON object with the config file's keys and value spellings (indent < 0: one
// line). Loading that text back gives the same options.
std::string era_options_json(const EraOptions& options, int indent = -1);

// ---- the competing methods ---------------------------------------------------------------------
// Defaults follow each method's official code (docs/methods.md).
struct BaselineOptions {
  // random
  uint64_t random_seed = 0;  // the same seed keeps the same tokens
  // VisionZip: share of the budget given to contextual (merged) tokens: 64 -> 54 dominant + 10.
  double visionzip_contextual_fraction = 10.0 / 64.0;
  // CDPruner: negate the relevance. The official CLIP-text CDPruner negates (CLIP penultimate
  // features rank inverted); our text-encoder-free variant compares with the decoder's token
  // embeddings, where the de-facto variant does not.
  bool cdpruner_negate_relevance = false;
  // FastV: K, layers 0..K-1 see every visual token, layers >= K the kept ones.
  int64_t fastv_layer = 2;
  // DART
  int64_t dart_layer = 2;         // K, as for FastV
  int64_t dart_image_pivots = 4;  // pivots among the image tokens (largest key L1 norm)
  int64_t dart_text_pivots = 4;   // pivots among the text after the image
  // false (official code): image pivots + (image + text pivots) * floor(B / 8) tokens are kept,
  // so --tokens 128 keeps 132; true: exactly B (our adaptation). Stats report the real count.
  bool dart_exact_budget = false;
};

// "key=value" -> the field of that name; throws era::Error(kInvalidArgument) naming the key for
// an unknown key or a bad value. Values: integers, numbers, true/false (also 1/0).
void set_baseline_option(BaselineOptions& options, const std::string& key_value);

// Throws era::Error(kInvalidArgument) naming the field if a value is out of range. (The FastV /
// DART layer is checked against the decoder's depth when a model runs it.)
void validate_baseline_options(const BaselineOptions& options);

// The options as a JSON object keyed by field name (indent < 0: one line).
std::string baseline_options_json(const BaselineOptions& options, int indent = -1);

}  // namespace era
