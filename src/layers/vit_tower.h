#pragma once
// Internal header. The ViT vision towers of the LLaVA families written once, in C++ over LibTorch
// operators and era's kernels: CLIP (LLaVA-1.5, LLaVA-NeXT: a CLS token, a pre-layernorm, QuickGELU)
// and SigLIP (LLaVA-OneVision: no CLS token, a biased patch convolution, tanh GELU). Both run only
// the layers up to the deepest selected one and return, besides the features, the saliency maps
// ERA and its competitors read from that layer.
//
// It computes what the exported TorchScript towers compute (tools/era_tools/llava_model.py,
// VisionTower; siglip_tower.py, SiglipVisionTower) with the same roundings, so the bundle's
// vision.pt and this tower give the same features and the same kept tokens.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "layers/linear.h"
#include "layers/vision_tower.h"

namespace era::layers {

struct ViTConfig {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t patch_size = 14;
  double layer_norm_eps = 1e-5;
  bool has_cls = true;     // CLIP: a CLS token leads the sequence (and its row is the saliency)
  bool tanh_gelu = false;  // SigLIP's gelu_pytorch_tanh; CLIP's QuickGELU otherwise
  // HF hidden_states indices of the selected layers, non-negative (i = the output of layer i-1),
  // in the config's order: their outputs are concatenated along the hidden dim. The tower runs
  // max(feature_indices) layers.
  std::vector<int64_t> feature_indices;
  int64_t first_token = 1;  // 1: HF's "default" strategy drops the first token, 0: "full" keeps it
  bool sdpa = false;        // the attention core: LibTorch's fused SDPA, else softmax(Q K^T) V
};

// One encoder layer's tensors (HF's names in comments).
struct ViTLayerWeights {
  torch::Tensor norm1_w, norm1_b;                            // layer_norm1.{weight,bias}
  torch::Tensor q, q_bias, k, k_bias, v, v_bias, o, o_bias;  // self_attn.{q,k,v,out}_proj.{weight,bias}
  // q, k and v's weights and biases as one [3C, C] product (set_routing fuses them where the
  // products go through oneDNN, as the exported tower's qkv_fused: 1.5-1.9x faster than three
  // [C, C] ones at 577 rows); q / k / v are then views of it.
  torch::Tensor qkv, qkv_bias;
  torch::Tensor norm2_w, norm2_b;              // layer_norm2
  torch::Tensor fc1, fc1_bias, fc2, fc2_bias;  // mlp.fc1, mlp.fc2
};

struct ViTWeights {
  torch::Tensor patch, patch_bias;       // embeddings.patch_embedding.{weight [C,3,P,P], bias (SigLIP)}
  torch::Tensor class_embedding;         // embeddings.class_embedding [C] (CLIP)
  torch::Tensor position;                // embeddings.position_embedding.weight [N(+1), C]
  torch::Tensor pre_norm_w, pre_norm_b;  // pre_layrnorm (CLIP)
  std::vector<ViTLayerWeights> layers;   // the layers that run
};

class ViTTower final : public VisionTower {
 public:
  ViTTower(ViTConfig config, ViTWeights weights);

  const ViTConfig& config() const { return config_; }
  const ViTWeights& weights() const { return weights_; }
  void set_routing(const VisionRouting& routing) override;
  int64_t weight_bytes() const override;
  int linear_count() const override;

  // pixels [B, 3, S, S] (any floating dtype) -> features [B, N', C x layers] (the selected layers'
  // outputs from first_token on) and the saliency of the deepest layer (layers/vision_tower.h).
  VisionTowerOutputs encode_crops(const torch::Tensor& pixels) const override;

 private:
  torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const;

  ViTConfig config_;
  ViTWeights weights_;
  VisionRouting routing_;
};

// The two-layer GELU projector of the LLaVA families (multi_modal_projector: linear_1, erf GELU,
// linear_2): features [..., C] -> [..., D].
struct MlpProjector {
  torch::Tensor w1, b1, w2, b2;  // linear_{1,2}.{weight,bias}; biases undefined where absent
  LinearRouting routing;
  torch::Tensor operator()(const torch::Tensor& features) const;
};

}  // namespace era::layers
