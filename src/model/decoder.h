#pragma once
// Stage 5: the LLaMA decoder with LAR-rectified attention, driven over a KvCache.
#include <torch/script.h>

#include "era/options.h"
#include "model/bundle.h"
#include "model/decoder_backend.h"
#include "model/kv_cache.h"

#include <memory>
#include <string>
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
  // The bundle's native decoder where the session attached one (model/native_decoder.h), else
  // its TorchScript decoder.pt.
  explicit Decoder(ModelBundle& bundle);

  // "native" or "torchscript": what computes the calls.
  std::string backend_name() const { return backend_->name(); }

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

  // ---- layer by layer (in-decoder pruning: FastV, DART) --------------------------------------
  // Whether the bundle exports run_range / final_norm / logits (bundles exported before these
  // methods existed do not; everything else works with them).
  bool supports_layer_ranges() const;
  // Throws era::Error(kBundle) naming `what` unless supports_layer_ranges().
  void require_layer_ranges(const std::string& what) const;

  // Runs hidden states `x` [B, T, D] at RoPE `positions` [B, T] (any positions: gaps allowed)
  // through layers [begin, end) only, writing their K/V into those layers' cache slots at the
  // layers' current length and advancing them (cache.advance_layers). Returns the hidden states
  // after layer end-1, and with `need_attention` those layers' last-query attention logits
  // [end-begin, B, H, length + T] (scaled, LAR bias included; otherwise an undefined tensor).
  std::pair<torch::Tensor, torch::Tensor> run_range(const torch::Tensor& x, const torch::Tensor& positions,
                                                    const torch::Tensor& key_log_bias, KvCache& cache, int64_t begin, int64_t end,
                                                    bool need_attention, const LarSettings& lar = {});
  // The final RMSNorm alone: [B, T, D] -> [B, T, D] in the model dtype.
  torch::Tensor final_norm(const torch::Tensor& x);
  // Final norm + LM head of the last layer's hidden states -> float32 [B, T, V] or [B, 1, V].
  torch::Tensor logits(const torch::Tensor& x, bool last_only);

  int64_t num_layers() const { return bundle_.manifest.text.num_layers; }
  const TextSpec& text_spec() const { return bundle_.manifest.text; }

  // A cache sized for this decoder.
  KvCache make_cache(int64_t batch, int64_t capacity) const;

 private:
  DecoderCall call(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                   KvCache& cache, int64_t start, const LarSettings& lar,
                   torch::Tensor layer_scale = {}) const;  // layer_scales(lar) where not given
  torch::Tensor layer_scales(const LarSettings& lar) const;
  ModelBundle& bundle_;
  std::shared_ptr<DecoderBackend> backend_;
};

}  // namespace era
