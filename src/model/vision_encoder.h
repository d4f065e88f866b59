#pragma once
// Stage 2 of the pipeline: pixels -> CLIP features and saliency -> projected visual tokens.
#include <torch/script.h>

#include <functional>

#include "model/bundle.h"

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
  // The bundle's projector: vision features [n, C] -> LLM embeddings [n, D].
  std::function<torch::Tensor(const torch::Tensor&)> project;
};

// One vision pass's input: fixed-size crops [B, 3, S, S] (grid_thw undefined), or the
// native-resolution patches [P, patch_dim] of items whose grids grid_thw [items, 3] int64 gives.
struct VisionBatch {
  torch::Tensor pixel_values;
  torch::Tensor grid_thw;
  bool empty() const { return !pixel_values.defined() || pixel_values.size(0) == 0; }
};

class VisionEncoder {
 public:
  explicit VisionEncoder(ModelBundle& bundle) : bundle_(bundle) {}

  // `pixels`: float32 [B, 3, S, S] (CPU or the model's device).
  VisionOutput encode(const torch::Tensor& pixels);
  // Native-resolution towers (Qwen2.5-VL): `patches` float32 [P, patch_dim] of items with grids
  // `grid_thw` [items, 3] int64, all in one pass. The output is one row (B = 1) of every item's
  // tokens in order (P / merge^2 of them): features [1, N, C], saliency [1, H, N].
  VisionOutput encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw);
  // Either of the above, as the batch holds.
  VisionOutput encode(const VisionBatch& batch) {
    return batch.grid_thw.defined() ? encode_native(batch.pixel_values, batch.grid_thw) : encode(batch.pixel_values);
  }

 private:
  // The module's output tuple, projected.
  VisionOutput outputs(const c10::IValue& value);
  ModelBundle& bundle_;
};

}  // namespace era
