#pragma once
// DART (in-decoder): after layer K-1, pivots (largest key L1 norm) each claim the image tokens
// least similar to them, so the kept set is diverse.
#include <memory>

#include "era/options.h"
#include "reduce/in_decoder_pruner.h"

namespace era {

struct DartParams {
  int64_t image_pivots = 4;
  int64_t text_pivots = 4;
  // false (official): each pivot claims floor(B / (image_pivots + text_pivots)) tokens, so
  // image_pivots + 8 * floor(B / 8) are kept (128 -> 132). true: exactly B (the B - image_pivots
  // picks spread over the pivots, earlier pivots one more), our adaptation.
  bool exact_budget = false;
};

// DART: pivots = the `image_pivots` image tokens and `text_pivots` later text tokens with the
// largest key L1 norm; each pivot in ascending position order claims its share of the remaining
// image tokens least cosine-similar to it (normed hidden states, first index on ties); keeps the
// image pivots and all picks.
std::vector<int64_t> dart_select(const torch::Tensor& keys, const torch::Tensor& normed_hidden, const ImageSpan& span,
                                 const std::vector<int64_t>& text_after, const DartParams& params);

// The pruner at layer options.dart_layer; throws era::Error(kInvalidArgument) naming the option
// unless the layer is in [1, num_layers - 1] and the pivot counts are >= 0.
std::unique_ptr<InDecoderPruner> make_dart_pruner(const BaselineOptions& options, int64_t num_layers);

}  // namespace era
