#include "model/decoder.h"

#include "era/error.h"

namespace era {

torch::Tensor Decoder::embed(const torch::Tensor& ids) {
  return bundle_.decoder.get_method("embed")({ids.to(bundle_.device, torch::kLong)}).toTensor();
}

std::vector<c10::IValue> Decoder::inputs(const torch::Tensor& embeds, const torch::Tensor& positions,
                                         const torch::Tensor& key_log_bias, KvCache& cache, const LarSettings& lar) {
  const int64_t layers = bundle_.manifest.text.num_layers;
  torch::Tensor scale;
  if (lar.layer_scale.empty()) {
    scale = torch::ones({layers}, torch::kFloat);
  } else if (static_cast<int64_t>(lar.layer_scale.size()) == layers) {
    scale = torch::tensor(lar.layer_scale, torch::kFloat);
  } else {
    throw Error(ErrorCode::kInvalidArgument, "LAR layer scales: " + std::to_string(lar.layer_scale.size()) +
                                                 " given for a decoder of " + std::to_string(layers) + " layers");
  }
  const int64_t start = cache.length();
  cache.advance(embeds.size(1));  // checks capacity before the module writes past the end
  return {embeds,
          positions.to(bundle_.device, torch::kLong),
          start,
          key_log_bias.to(bundle_.device, torch::kFloat),
          cache.keys(),
          cache.values(),
          scale.to(bundle_.device),
          static_cast<int64_t>(lar.path == LarPath::kAugmented ? 0 : 1)};
}

torch::Tensor Decoder::forward(const torch::Tensor& embeds, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                               KvCache& cache, bool last_only, const LarSettings& lar) {
  auto args = inputs(embeds, positions, key_log_bias, cache, lar);
  args.emplace_back(last_only);
  return bundle_.decoder.forward(std::move(args)).toTensor();
}

std::pair<torch::Tensor, torch::Tensor> Decoder::forward_with_attention(const torch::Tensor& embeds,
                                                                        const torch::Tensor& positions,
                                                                        const torch::Tensor& key_log_bias, KvCache& cache,
                                                                        const LarSettings& lar) {
  const auto out = bundle_.decoder.get_method("forward_with_attention")(inputs(embeds, positions, key_log_bias, cache, lar)).toTuple();
  return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
}

KvCache Decoder::make_cache(int64_t batch, int64_t capacity) const {
  return KvCache(bundle_.manifest.text, batch, capacity, bundle_.dtype, bundle_.device);
}

}  // namespace era
