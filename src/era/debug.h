#pragma once
// Optional, for parity checks and debugging tools: the exact tensors a Session feeds its model.
// Unlike era/era.h this header needs LibTorch's headers (and the program must link LibTorch,
// which it does anyway through era::era).
#include <torch/script.h>

#include "era/era.h"

namespace era::debug {

// Session::prepare's result and, from the same pass, the exact vision-tower input.
struct PreparedTensors : PreparedInput {
  // float32 [crops, 3, S, S]: every image crop after normalisation, in order (`crops` are the
  // same crops before it).
  torch::Tensor pixel_values;
};

// Session::prepare with the pixel tensor kept; throws as Session::prepare.
PreparedTensors prepare(const Session& session, const Request& request);

// The decoder's input for a request, after the vision tower and the request's reduction, and
// the prefill's logits: what an outside implementation (transformers' decoder fed these
// embeddings with log b as an attention mask) must reproduce.
struct PromptTensors {
  torch::Tensor embeds;                 // [1, L, D] model dtype: text and (reduced) visual tokens
  torch::Tensor positions;              // [1, L] int64
  torch::Tensor key_log_bias;           // [1, L] float32: LAR's log b per key (0 for text)
  std::vector<float> layer_bias_scale;  // per decoder layer: the multiplier of key_log_bias
  torch::Tensor logits;                 // float32 [L, V]: logits at every prompt position
  int64_t visual_tokens = 0;
};

// Preprocess, vision, reduce, splice and one full prefill of `request`. Throws as
// Session::generate, and kInvalidArgument for an in-decoder method (fastv, dart: their prefill
// changes the sequence between layers).
PromptTensors prompt(Session& session, const Request& request);

}  // namespace era::debug
