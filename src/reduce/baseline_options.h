#pragma once
// Parameters of the competing methods (see /work/shared/reference/baselines.md and README
// "Competing methods"). Defaults follow each method's official code; `set_baseline_option`
// switches any of them from the command line (`--method-set key=value`).
#include <cstdint>
#include <string>

namespace era {

struct BaselineOptions {
  // ---- random ---------------------------------------------------------------------------------
  uint64_t random_seed = 0;  // the same seed keeps the same tokens

  // ---- VisionZip ------------------------------------------------------------------------------
  // Share of the budget given to contextual (merged) tokens: 64 -> 54 dominant + 10 contextual.
  double visionzip_contextual_fraction = 10.0 / 64.0;

  // ---- CDPruner -------------------------------------------------------------------------------
  // Negate the relevance. The official CLIP-text CDPruner negates (CLIP penultimate features rank
  // inverted); our text-encoder-free variant compares with the decoder's token embeddings, where
  // the de-facto variant does not (baselines.md §5.5-5.6).
  bool cdpruner_negate_relevance = false;

  // ---- FastV ----------------------------------------------------------------------------------
  int64_t fastv_layer = 2;  // K: layers 0..K-1 see every visual token, layers >= K the kept ones

  // ---- DART -----------------------------------------------------------------------------------
  int64_t dart_layer = 2;         // K, as for FastV
  int64_t dart_image_pivots = 4;  // pivots among the image tokens (largest key L1 norm)
  int64_t dart_text_pivots = 4;   // pivots among the text after the image
  // false (official code): image pivots + (image + text pivots) * floor(B / 8) tokens are kept, so
  // --tokens 128 keeps 132; true: exactly B (our adaptation). Stats report the real count.
  bool dart_exact_budget = false;
};

// "key=value" -> the field of that name; throws era::Error(kInvalidArgument) naming the key for an
// unknown key or a bad value.
void set_baseline_option(BaselineOptions& options, const std::string& key_value);

}  // namespace era
