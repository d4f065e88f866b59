#pragma once
// Internal header. What computes a decoder call: the bundle's TorchScript module
// (model/torchscript_decoder.h) or era's own C++ decoder over a Hugging Face folder's weights
// (model/native_decoder.h). model/decoder.h checks the arguments and the cache, then hands the
// call to one of them; both compute the same thing with the same roundings.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>

namespace era {

// One call's inputs, on the model's device: x [B, T, D], positions [B, T] or [B, T, 3] (int64),
// key_log_bias [B, T] (float32), the whole cache [L, B, Hkv, S, cache_head_dim] written at slot
// cache_pos, one LAR scale per layer [L] (float32), and the LAR form.
struct DecoderCall {
  torch::Tensor x, positions;
  int64_t cache_pos = 0;
  torch::Tensor key_log_bias, k_cache, v_cache, layer_scale;
  bool lar_mask = false;  // LarPath::kAdditiveMask
};

class DecoderBackend {
 public:
  virtual ~DecoderBackend() = default;
  virtual std::string name() const = 0;  // "torchscript" or "native"

  virtual torch::Tensor embed(const torch::Tensor& ids) = 0;
  // Every layer, then the logits: float32 [B, T, V] or [B, 1, V].
  virtual torch::Tensor forward(const DecoderCall& call, bool last_only) = 0;
  // forward(last_only) and every layer's last-query attention logits [L, B, H, cache_pos + T].
  virtual std::pair<torch::Tensor, torch::Tensor> forward_with_attention(const DecoderCall& call) = 0;
  // Layers [begin, end) only (model/decoder.h, Decoder::run_range).
  virtual std::pair<torch::Tensor, torch::Tensor> run_range(const DecoderCall& call, int64_t begin, int64_t end,
                                                            bool need_attention) = 0;
  virtual torch::Tensor final_norm(const torch::Tensor& x) = 0;
  virtual torch::Tensor logits(const torch::Tensor& x, bool last_only) = 0;
  // Whether run_range / final_norm / logits exist (old bundles lack them).
  virtual bool supports_layer_ranges() const = 0;
};

}  // namespace era
