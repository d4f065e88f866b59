#pragma once
// Stage 2 of the pipeline: pixels -> CLIP features and saliency -> projected visual tokens.
#include <torch/script.h>

#include "model/bundle.h"

namespace era {

struct VisionOutput {
  torch::Tensor features;     // [B, N, C] vision features of the feature layer, CLS dropped
  torch::Tensor attn_logits;  // [B, H, N] float32: CLS-query attention logits of that layer
  torch::Tensor attn_probs;   // [B, H, N] float32: CLS-query attention probabilities
  torch::Tensor embeddings;   // [B, N, D] projector output: the visual tokens in LLM space
};

class VisionEncoder {
 public:
  explicit VisionEncoder(ModelBundle& bundle) : bundle_(bundle) {}

  // `pixels`: float32 [B, 3, S, S] (CPU or the model's device).
  VisionOutput encode(const torch::Tensor& pixels);

 private:
  ModelBundle& bundle_;
};

}  // namespace era
