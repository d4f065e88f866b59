#pragma once
// Stage 5: the LLaMA decoder with LAR-rectified attention, driven over a KvCache.
#include <torch/script.h>

#include "model/bundle.h"
#include "model/kv_cache.h"
#include "reduce/era_options.h"

#include <utility>
#include <vector>

namespace era {

// How LAR's per-key log-bias enters attention: per-layer multipliers (empty = 1 in every layer)
// and the kernel path (augmented key dimension, or an additive mask; same maths).
struct LarSettings {
  std::vector<float> layer_scale;
  LarPath path = LarPath::kAugmented;
};

class Decoder {
 public:
  explicit Decoder(ModelBundle& bundle) : bundle_(bundle) {}

  // Token ids [B, T] (int64) -> embeddings [B, T, D] in the model dtype.
  torch::Tensor embed(const torch::Tensor& ids);

  // Runs `embeds` [B, T, D] at RoPE `positions` [B, T] through the decoder, writing their K/V
  // into `cache` at its current length and advancing it. `key_log_bias` [B, T] is LAR's log b of
  // each new token as a key (0 = plain attention). Returns float32 logits [B, T, V], or [B, 1, V]
  // for the last position only.
  torch::Tensor forward(const torch::Tensor& embeds, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                        KvCache& cache, bool last_only, const LarSettings& lar = {});

  // As forward (last position only), and also every layer's last-query attention logits
  // [L, B, H, cache length] (scaled, LAR bias included): what each layer's softmax sees.
  std::pair<torch::Tensor, torch::Tensor> forward_with_attention(const torch::Tensor& embeds, const torch::Tensor& positions,
                                                                 const torch::Tensor& key_log_bias, KvCache& cache,
                                                                 const LarSettings& lar = {});

  // A cache sized for this decoder.
  KvCache make_cache(int64_t batch, int64_t capacity) const;

 private:
  std::vector<c10::IValue> inputs(const torch::Tensor& embeds, const torch::Tensor& positions,
                                  const torch::Tensor& key_log_bias, KvCache& cache, const LarSettings& lar);
  ModelBundle& bundle_;
};

}  // namespace era
