#pragma once
// Internal header. What era's native vision towers share (layers/vit_tower.h for the LLaVA
// families' CLIP and SigLIP; family/qwen2_5_vl/qwen_vision_tower.h for Qwen2.5-VL's): the outputs
// a pass gives every reduction method, how the runtime routes its products, and the interface
// the vision backend (model/native_vision.h) calls.
#include <torch/torch.h>

#include <cstdint>

#include "layers/linear.h"

namespace era::layers {

// One pass's outputs (float32 saliency, computed beside the attention from the model-dtype q and k).
struct VisionTowerOutputs {
  torch::Tensor features;     // [B, N', C'] the selected features
  torch::Tensor cls_logits;   // [B, H, N] the deepest layer's CLS-query logits, CLS column dropped ([B,H,0] without CLS)
  torch::Tensor cls_probs;    // [B, H, N] their softmax over the whole row, then the CLS column dropped
  torch::Tensor mean_logits;  // [B, H, N] logits averaged over the patch queries (all queries without CLS)
  torch::Tensor mean_probs;   // [B, H, N]
  torch::Tensor cls_feature;  // [B, C] the deepest layer's CLS output ([B, 0] without CLS)
  torch::Tensor mean_keys;    // [B, N(+1), head_dim] that layer's keys averaged over the heads ([B, N, 0]: none)
};

// How a tower's products run on this device and dtype (set by the runtime, model/cpu_matmul.h,
// as on the exported modules).
struct VisionRouting {
  LinearRouting linear;
  int64_t upcast_min_rows = 0;   // attention: bf16 / fp16 products widened to float32 from this many rows
  bool per_head_kernel = false;  // attention in era::widened_attention (bf16 where that beats LibTorch's)
  bool layer_norm_f32 = false;   // bf16 / fp16 layer norms computed in float32 and rounded once
};

class VisionTower {
 public:
  virtual ~VisionTower() = default;
  // Fixed-size crops [B, 3, S, S], or native-resolution patches [P, patch_dim] of items with grids
  // [items, 3]: each tower takes one of the two and refuses the other (kInvalidArgument).
  virtual VisionTowerOutputs encode_crops(const torch::Tensor& pixels) const;
  virtual VisionTowerOutputs encode_patches(const torch::Tensor& patches, const torch::Tensor& grid_thw) const;
  virtual void set_routing(const VisionRouting& routing) = 0;
  virtual int64_t weight_bytes() const = 0;  // the weights as held
  virtual int linear_count() const = 0;      // its linear products per pass, as routed
};

}  // namespace era::layers
