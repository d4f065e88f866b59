#pragma once
// What a vision pass takes and returns, whichever backend computes it (model/vision_backend.h).
#include <torch/torch.h>

#include <functional>

namespace era {

struct VisionOutput {
  torch::Tensor features;     // [B, N, C] vision features of the feature layer, CLS dropped
  torch::Tensor cls_logits;   // [B, H, N] float32: CLS-query attention logits of that layer
  torch::Tensor cls_probs;    // [B, H, N] float32: CLS-query attention probabilities
  torch::Tensor mean_logits;  // [B, H, N] float32: attention logits averaged over patch queries
  torch::Tensor mean_probs;   // [B, H, N] float32
  torch::Tensor embeddings;   // [B, N, D] projector output: the visual tokens in LLM space
  // Undefined for bundles whose vision.pt returns 5 outputs (exported before VisionZip support).
  torch::Tensor cls_features;  // [B, C] the CLS token's feature of the feature layer
  torch::Tensor mean_keys;     // [B, N+1, hd] float32: that layer's head-mean keys, CLS first
  // The model's projector: vision features [n, C] -> LLM embeddings [n, D].
  std::function<torch::Tensor(const torch::Tensor&)> project;
};

// One vision pass's input: fixed-size crops [B, 3, S, S] (grid_thw undefined), or the
// native-resolution patches [P, patch_dim] of items whose grids grid_thw [items, 3] int64 gives.
struct VisionBatch {
  torch::Tensor pixel_values;
  torch::Tensor grid_thw;
  bool empty() const { return !pixel_values.defined() || pixel_values.size(0) == 0; }
};

}  // namespace era
