#pragma once
// FastV (in-decoder): after layer K-1, keep the image tokens the last prompt token attends to most.
#include <memory>

#include "era/options.h"
#include "reduce/in_decoder_pruner.h"

namespace era {

// Softmax of the last prompt token's attention row over ALL keys, mean over heads; the span's
// `budget` most attended tokens (first index on ties), ascending.
std::vector<int64_t> fastv_select(const torch::Tensor& attention_logits, const ImageSpan& span);

// The pruner at layer options.fastv_layer; throws era::Error(kInvalidArgument) naming fastv_layer
// unless it is in [1, num_layers - 1].
std::unique_ptr<InDecoderPruner> make_fastv_pruner(const BaselineOptions& options, int64_t num_layers);

}  // namespace era
