#pragma once
// Stage 5: the LLaMA decoder with LAR-rectified attention, driven over a KvCache.
#include <torch/script.h>

#include "model/bundle.h"
#include "model/kv_cache.h"

namespace era {

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
                        KvCache& cache, bool last_only);

  // A cache sized for this decoder.
  KvCache make_cache(int64_t batch, int64_t capacity) const;

 private:
  ModelBundle& bundle_;
};

}  // namespace era
