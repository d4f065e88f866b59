#include "model/torchscript_decoder.h"

#include <vector>

#include "model/graph_optimizer.h"

namespace era {
namespace {

std::vector<c10::IValue> arguments(const DecoderCall& c) {
  return {c.x, c.positions, c.cache_pos, c.key_log_bias, c.k_cache, c.v_cache, c.layer_scale,
          static_cast<int64_t>(c.lar_mask ? 1 : 0)};
}

}  // namespace

torch::Tensor TorchScriptDecoder::embed(const torch::Tensor& ids) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("embed")({ids}).toTensor();
}

torch::Tensor TorchScriptDecoder::forward(const DecoderCall& call, bool last_only) {
  auto args = arguments(call);
  args.emplace_back(last_only);
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.forward(std::move(args)).toTensor();
}

std::pair<torch::Tensor, torch::Tensor> TorchScriptDecoder::forward_with_attention(const DecoderCall& call) {
  GraphOptimizerScope scope(bundle_);
  const auto out = bundle_.decoder.get_method("forward_with_attention")(arguments(call)).toTuple();
  return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
}

std::pair<torch::Tensor, torch::Tensor> TorchScriptDecoder::run_range(const DecoderCall& call, int64_t begin, int64_t end,
                                                                      bool need_attention) {
  auto args = arguments(call);
  args.emplace_back(begin);
  args.emplace_back(end);
  args.emplace_back(need_attention);
  GraphOptimizerScope scope(bundle_);
  const auto out = bundle_.decoder.get_method("run_range")(std::move(args)).toTuple();
  torch::Tensor attention;
  if (need_attention) attention = out->elements()[1].toTensor();
  return {out->elements()[0].toTensor(), attention};
}

torch::Tensor TorchScriptDecoder::final_norm(const torch::Tensor& x) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("final_norm")({x}).toTensor();
}

torch::Tensor TorchScriptDecoder::logits(const torch::Tensor& x, bool last_only) {
  GraphOptimizerScope scope(bundle_);
  return bundle_.decoder.get_method("logits")({x, last_only}).toTensor();
}

bool TorchScriptDecoder::supports_layer_ranges() const {
  const auto& m = bundle_.decoder;
  return m.find_method("run_range").has_value() && m.find_method("final_norm").has_value() && m.find_method("logits").has_value();
}

}  // namespace era
