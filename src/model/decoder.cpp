#include "model/decoder.h"

namespace era {

torch::Tensor Decoder::embed(const torch::Tensor& ids) {
  return bundle_.decoder.get_method("embed")({ids.to(bundle_.device, torch::kLong)}).toTensor();
}

torch::Tensor Decoder::forward(const torch::Tensor& embeds, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                               KvCache& cache, bool last_only) {
  const int64_t start = cache.length();
  cache.advance(embeds.size(1));  // checks capacity before the module writes past the end
  auto logits = bundle_.decoder.forward({embeds, positions.to(bundle_.device, torch::kLong), start,
                                         key_log_bias.to(bundle_.device, torch::kFloat), cache.keys(), cache.values(),
                                         last_only});
  return logits.toTensor();
}

KvCache Decoder::make_cache(int64_t batch, int64_t capacity) const {
  return KvCache(bundle_.manifest.text, batch, capacity, bundle_.dtype, bundle_.device);
}

}  // namespace era
