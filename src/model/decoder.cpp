#include "model/decoder.h"

#include "era/error.h"
#include "model/native_decoder.h"
#include "model/torchscript_decoder.h"

namespace era {

Decoder::Decoder(ModelBundle& bundle) : bundle_(bundle) {
  if (bundle.native_decoder) backend_ = bundle.native_decoder;
  else backend_ = std::make_shared<TorchScriptDecoder>(bundle);
}

torch::Tensor Decoder::embed(const torch::Tensor& ids) { return backend_->embed(ids.to(bundle_.device, torch::kLong)); }

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

DecoderCall Decoder::call(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                          KvCache& cache, int64_t start, const LarSettings& lar, torch::Tensor layer_scale) const {
  DecoderCall c;
  c.x = x;
  c.positions = positions.to(bundle_.device, torch::kLong);
  c.cache_pos = start;
  c.key_log_bias = key_log_bias.to(bundle_.device, torch::kFloat);
  c.k_cache = cache.keys();
  c.v_cache = cache.values();
  c.layer_scale = layer_scale.defined() ? std::move(layer_scale) : layer_scales(lar);
  c.lar_mask = lar.path != LarPath::kAugmented;
  return c;
}

torch::Tensor Decoder::forward(const torch::Tensor& embeds, const torch::Tensor& positions, const torch::Tensor& key_log_bias,
                               KvCache& cache, bool last_only, const LarSettings& lar) {
  const int64_t start = cache.length();
  const DecoderCall c = call(embeds, positions, key_log_bias, cache, start, lar);
  cache.advance(embeds.size(1));  // checks capacity before the decoder writes past the end
  return backend_->forward(c, last_only);
}

std::pair<torch::Tensor, torch::Tensor> Decoder::forward_with_attention(const torch::Tensor& embeds,
                                                                        const torch::Tensor& positions,
                                                                        const torch::Tensor& key_log_bias, KvCache& cache,
                                                                        const LarSettings& lar) {
  const int64_t start = cache.length();
  const DecoderCall c = call(embeds, positions, key_log_bias, cache, start, lar);
  cache.advance(embeds.size(1));
  return backend_->forward_with_attention(c);
}

bool Decoder::supports_layer_ranges() const { return backend_->supports_layer_ranges(); }

void Decoder::require_layer_ranges(const std::string& what) const {
  if (supports_layer_ranges()) return;
  throw Error(ErrorCode::kBundle, what +
                                      " needs decoder.pt methods run_range, final_norm and logits, which this bundle "
                                      "lacks: re-export the bundle with the current tools/export_llava.py");
}

std::pair<torch::Tensor, torch::Tensor> Decoder::run_range(const torch::Tensor& x, const torch::Tensor& positions,
                                                           const torch::Tensor& key_log_bias, KvCache& cache, int64_t begin,
                                                           int64_t end, bool need_attention, const LarSettings& lar) {
  const torch::Tensor scale = layer_scales(lar);  // checks the scales before the range
  if (begin < 0 || end > num_layers() || begin >= end) {
    throw Error(ErrorCode::kInvalidArgument, "decoder layer range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                                 ") is not inside the " + std::to_string(num_layers()) + " layers");
  }
  const int64_t start = cache.layer_length(begin);
  const DecoderCall c = call(x, positions, key_log_bias, cache, start, lar, scale);
  cache.advance_layers(begin, end, x.size(1));  // checks lengths and capacity before the decoder writes
  return backend_->run_range(c, begin, end, need_attention);
}

torch::Tensor Decoder::final_norm(const torch::Tensor& x) { return backend_->final_norm(x); }

torch::Tensor Decoder::logits(const torch::Tensor& x, bool last_only) { return backend_->logits(x, last_only); }

KvCache Decoder::make_cache(int64_t batch, int64_t capacity) const {
  return KvCache(bundle_.manifest.text, batch, capacity, bundle_.dtype, bundle_.device);
}

}  // namespace era
