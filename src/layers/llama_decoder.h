#pragma once
// Internal header. The LLaMA-style decoder (LLaMA, Vicuna, Mistral, Yi, Qwen2) written once, in
// C++ over LibTorch operators and era's kernels: pre-norm blocks of grouped-query attention with
// RoPE (or M-RoPE) and a gated SiLU MLP, biased q/k/v projections where the checkpoint has them,
// and LAR's rectified attention over an in-place KV cache.
//
// It computes what the exported TorchScript decoder computes (tools/era_tools/llava_model.py,
// LlamaDecoder) with the same roundings, one operator at a time from C++: no graph between era and
// the kernels, so the runtime chooses the kernel of every call.
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "layers/lar_attention.h"
#include "layers/linear.h"

namespace era::layers {

struct DecoderConfig {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t cache_head_dim = 0;  // head_dim + LAR's bias channel, padded (model/kv_cache.h)
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::vector<int64_t> mrope_section;  // empty: 1-D RoPE
  AttentionKernel attention = AttentionKernel::kMath;
};

// One block's tensors, HF's names in comments; biases undefined where the checkpoint has none.
struct DecoderLayerWeights {
  torch::Tensor input_norm;                 // input_layernorm.weight
  torch::Tensor q, k, v, o;                 // self_attn.{q,k,v,o}_proj.weight
  torch::Tensor q_bias, k_bias, v_bias;     // self_attn.{q,k,v}_proj.bias (Qwen2)
  torch::Tensor post_norm;                  // post_attention_layernorm.weight
  torch::Tensor gate, up, down;             // mlp.{gate,up,down}_proj.weight
};

struct DecoderWeights {
  torch::Tensor embed;    // embed_tokens.weight [V, D]
  std::vector<DecoderLayerWeights> layers;
  torch::Tensor norm;     // norm.weight
  torch::Tensor lm_head;  // lm_head.weight [V, D] (the embedding matrix itself when tied)
};

// How each call runs on this device and dtype (set by the runtime, model/cpu_matmul.h).
struct DecoderRouting {
  LinearRouting linear;
  AttentionRouting attention;
};

class LlamaDecoder {
 public:
  LlamaDecoder(DecoderConfig config, DecoderWeights weights);

  const DecoderConfig& config() const { return config_; }
  const DecoderWeights& weights() const { return weights_; }
  void set_routing(const DecoderRouting& routing) { routing_ = routing; }
  const DecoderRouting& routing() const { return routing_; }

  torch::Tensor embed(const torch::Tensor& ids) const;  // [B, T] int64 -> [B, T, D]

  // Layers [begin, end) over x [B, T, D] at positions [B, T] or [B, T, 3]. Writes each layer i's
  // K~ / V~ into k_cache[i] / v_cache[i] ([L, B, Hkv, S, cache_head_dim]) at slot cache_pos, the
  // bias column sqrt(d) * layer_scale[i] * key_log_bias [B, T]. lar_mask: the additive-mask form.
  // Returns the hidden states and, with need_attention, the last query's attention logits
  // [end-begin, B, H, cache_pos+T] (float32, scaled, bias included).
  std::pair<torch::Tensor, torch::Tensor> run_range(const torch::Tensor& x, const torch::Tensor& positions,
                                                    int64_t cache_pos, const torch::Tensor& key_log_bias,
                                                    const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                                    const torch::Tensor& layer_scale, bool lar_mask, int64_t begin,
                                                    int64_t end, bool need_attention) const;

  torch::Tensor final_norm(const torch::Tensor& x) const;
  // Final norm + LM head -> float32 [B, T, V], or [B, 1, V] for the last position only.
  torch::Tensor logits(const torch::Tensor& x, bool last_only) const;

 private:
  std::pair<torch::Tensor, torch::Tensor> attention(const DecoderLayerWeights& w, const torch::Tensor& x,
                                                    const torch::Tensor& cos, const torch::Tensor& sin,
                                                    int64_t cache_pos, const torch::Tensor& key_bias,
                                                    const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                                    bool lar_mask, bool need_attention) const;
  torch::Tensor mlp(const DecoderLayerWeights& w, const torch::Tensor& x) const;

  DecoderConfig config_;
  DecoderWeights weights_;
  DecoderRouting routing_;
};

}  // namespace era::layers
