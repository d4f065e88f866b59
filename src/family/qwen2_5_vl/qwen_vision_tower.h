#pragma once
// Qwen2.5-VL's native-resolution vision tower written once, in C++ over LibTorch
// operators and era's kernels: a Conv3d patch embedding over the processor's flattened patches,
// 2-D rotary embeddings, blocks that attend within windows (or, for the full-attention blocks,
// within each temporal slice of each item), RMSNorms and gated SiLU MLPs with biases, and the
// merger's RMSNorm with the rows grouped by merge unit. The merger's MLP is the projector
// (layers/vit_tower.h, MlpProjector).
//
// It computes what the exported TorchScript tower computes (tools/era_tools/qwen_vl_model.py,
// QwenVisionTower, from transformers' Qwen2_5_VisionTransformerPretrainedModel) with the same
// roundings, saliency included (ERA's "mean" readout of the last block, per merge unit).
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "layers/linear.h"
#include "layers/vision_tower.h"

namespace era {

struct QwenVisionConfig {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t window_units = 0;          // window_size / spatial_merge_size / patch_size: merge units a window side
  std::vector<bool> full_attention;  // per block: attends within the whole temporal slice
  double rope_theta = 10000.0;
  int64_t saliency_chunk = 1024;  // query rows per saliency product
};

// One block's tensors (HF's names in comments).
struct QwenVisionBlockWeights {
  torch::Tensor norm1, norm2;                                   // norm{1,2}.weight
  torch::Tensor qkv, qkv_bias, proj, proj_bias;                 // attn.qkv, attn.proj
  torch::Tensor gate, gate_bias, up, up_bias, down, down_bias;  // mlp.{gate,up,down}_proj
};

struct QwenVisionWeights {
  torch::Tensor patch;  // patch_embed.proj.weight [C, 3, T, P, P]
  std::vector<QwenVisionBlockWeights> blocks;
  torch::Tensor ln_q;  // merger.ln_q.weight [C]
};

class QwenVisionTower final : public layers::VisionTower {
 public:
  QwenVisionTower(QwenVisionConfig config, QwenVisionWeights weights);

  const QwenVisionConfig& config() const { return config_; }
  const QwenVisionWeights& weights() const { return weights_; }
  // (its linears and attention products; its norms are RMSNorms, per_head_kernel and layer_norm_f32
  // do not apply)
  void set_routing(const layers::VisionRouting& routing) override { routing_ = routing; }
  int64_t weight_bytes() const override;
  int linear_count() const override { return 5 * static_cast<int>(weights_.blocks.size()); }

  // patches [Np, 3 * T * P * P] of items with grids grid_thw [n, 3] (int64, CPU or the device) ->
  // features [1, Nm, merge^2 C], empty CLS outputs ([1, H, 0], [1, 0]), mean_logits / mean_probs
  // [1, H, Nm] float32 (per merge unit: the mean / the sum of its patches), mean_keys [1, Nm, 0].
  layers::VisionTowerOutputs encode_patches(const torch::Tensor& patches, const torch::Tensor& grid_thw) const override;

 private:
  QwenVisionConfig config_;
  QwenVisionWeights weights_;
  layers::VisionRouting routing_;
};

}  // namespace era
