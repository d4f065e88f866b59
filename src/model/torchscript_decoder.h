#pragma once
// Internal header. The decoder as the bundle's TorchScript module decoder.pt computes it (the
// methods and their arguments: docs/bundle-format.md).
#include "model/bundle.h"
#include "model/decoder_backend.h"

namespace era {

class TorchScriptDecoder final : public DecoderBackend {
 public:
  explicit TorchScriptDecoder(ModelBundle& bundle) : bundle_(bundle) {}
  std::string name() const override { return "torchscript"; }
  torch::Tensor embed(const torch::Tensor& ids) override;
  torch::Tensor forward(const DecoderCall& call, bool last_only) override;
  std::pair<torch::Tensor, torch::Tensor> forward_with_attention(const DecoderCall& call) override;
  std::pair<torch::Tensor, torch::Tensor> run_range(const DecoderCall& call, int64_t begin, int64_t end,
                                                    bool need_attention) override;
  torch::Tensor final_norm(const torch::Tensor& x) override;
  torch::Tensor logits(const torch::Tensor& x, bool last_only) override;
  bool supports_layer_ranges() const override;

 private:
  ModelBundle& bundle_;
};

}  // namespace era
