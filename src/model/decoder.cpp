#include "model/decoder.h"

#include "era/error.h"
#include "model/graph_optimizer.h"

namespace era {

torch::Tensor Decoder::embed(const torch::Tensor& ids) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("embed")({ids.to(bundle_.device, torch::kLong)}).toTensor();
}

torch::Tensor Decoder::layer_scales(const LarSettings& lar) const {
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
  return scale.to(bundle_.device);
}

std::vector<c10::IValue> Decoder::inputs(const torch::Tensor& embeds, const torch::Tensor& positions,
                                         const torch::Tensor& key_log_bias, KvCache& cache, const LarSettings& lar) {
  const torch::Tensor scale = layer_scales(lar);
  const int64_t start = cache.length();
  cache.advance(embeds.size(1));  // checks capacity before the module writes past the end
  return {embeds,       positions.to(bundle_.device, torch::kLong),
          start,        key_log_bias.to(bundle_.device, torch::kFloat),
          cache.keys(), cache.values(),
          scale,        static_cast<int64_t>(lar.path == LarPath::kAugmented ? 0 : 1)};
}

torch::Tensor Decoder::forward(const torch::Tensor& embeds, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                               KvCache& cache, bool last_only, const LarSettings& lar) {
  auto args = inputs(embeds, positions, key_log_bias, cache, lar);
  args.emplace_back(last_only);
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.forward(std::move(args)).toTensor();
}

std::pair<torch::Tensor, torch::Tensor> Decoder::forward_with_attention(const torch::Tensor& embeds,
                                                                        const torch::Tensor& positions,
                                                                        const torch::Tensor& key_log_bias, KvCache& cache,
                                                                        const LarSettings& lar) {
  GraphOptimizerScope scope(bundle_);
  const auto out =
      bundle_.decoder.get_method("forward_with_attention")(inputs(embeds, positions, key_log_bias, cache, lar)).toTuple();
  return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
}

bool Decoder::supports_layer_ranges() const {
  const auto& m = bundle_.decoder;
  return m.find_method("run_range").has_value() && m.find_method("final_norm").has_value() && m.find_method("logits").has_value();
}

void Decoder::require_layer_ranges(const std::string& what) const {
  if (supports_layer_ranges()) return;
  throw Error(ErrorCode::kBundle, what +
                                      " needs decoder.pt methods run_range, final_norm and logits, which this bundle "
                                      "lacks: re-export the bundle with the current tools/export_llava.py");
}

std::pair<torch::Tensor, torch::Tensor> Decoder::run_range(const torch::Tensor& x, const torch::Tensor& positions,
                                                           const torch::Tensor& key_log_bias, KvCache& cache, int64_t begin,
                                                           int64_t end, bool need_attention, const LarSettings& lar) {
  const torch::Tensor scale = layer_scales(lar);
  if (begin < 0 || end > num_layers() || begin >= end) {
    throw Error(ErrorCode::kInvalidArgument, "decoder layer range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                                 ") is not inside the " + std::to_string(num_layers()) + " layers");
  }
  const int64_t start = cache.layer_length(begin);
  cache.advance_layers(begin, end, x.size(1));  // checks lengths and capacity before the module writes
  GraphOptimizerScope scope(bundle_);
  const auto out =
      bundle_.decoder
          .get_method("run_range")({x, positions.to(bundle_.device, torch::kLong), start,
                                    key_log_bias.to(bundle_.device, torch::kFloat), cache.keys(), cache.values(), scale,
                                    static_cast<int64_t>(lar.path == LarPath::kAugmented ? 0 : 1), begin, end, need_attention})
          .toTuple();
  torch::Tensor attention;
  if (need_attention) attention = out->elements()[1].toTensor();
  return {out->elements()[0].toTensor(), attention};
}

torch::Tensor Decoder::final_norm(const torch::Tensor& x) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("final_norm")({x}).toTensor();
}

torch::Tensor Decoder::logits(const torch::Tensor& x, bool last_only) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("logits")({x, last_only}).toTensor();
}

KvCache Decoder::make_cache(int64_t batch, int64_t capacity) const {
  return KvCache(bundle_.manifest.text, batch, capacity, bundle_.dtype, bundle_.device);
}

}  // namespace era
