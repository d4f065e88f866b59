#pragma once
// Internal header. The decoder as era's own C++ model (layers/llama_decoder.h), its weights read
// straight from a Hugging Face folder's `*.safetensors` (model/safetensors.h: memory-mapped,
// converted once to the session's dtype and device) instead of the bundle's decoder.pt.
//
// The folder is the checkpoint the bundle was exported from (or one of the same shape): every
// tensor is checked against the manifest's text section, so another model's weights are refused
// naming the file and the tensor. Names of both layouts are read: transformers >= 4.52 /
// 5 (`model.language_model.*`, `lm_head.*`), llava-hf before it (`language_model.model.*`,
// `language_model.lm_head.*`) and Qwen2.5-VL's released one (`model.*`, `lm_head.*`); tied
// embeddings (tie_word_embeddings in config.json, top level or text_config) give the head the
// embedding matrix.
#include <memory>
#include <string>

#include "layers/llama_decoder.h"
#include "model/decoder_backend.h"
#include "model/manifest.h"

namespace era {

class NativeDecoder final : public DecoderBackend {
 public:
  explicit NativeDecoder(layers::LlamaDecoder model) : model_(std::move(model)) {}
  std::string name() const override { return "native"; }
  torch::Tensor embed(const torch::Tensor& ids) override { return model_.embed(ids); }
  torch::Tensor forward(const DecoderCall& call, bool last_only) override;
  std::pair<torch::Tensor, torch::Tensor> forward_with_attention(const DecoderCall& call) override;
  std::pair<torch::Tensor, torch::Tensor> run_range(const DecoderCall& call, int64_t begin, int64_t end,
                                                    bool need_attention) override;
  torch::Tensor final_norm(const torch::Tensor& x) override { return model_.final_norm(x); }
  torch::Tensor logits(const torch::Tensor& x, bool last_only) override { return model_.logits(x, last_only); }
  bool supports_layer_ranges() const override { return true; }

  layers::LlamaDecoder& model() { return model_; }
  // Bytes of the weights as held (tied matrices once).
  int64_t weight_bytes() const;
  // Bytes of them copied into transparent huge pages at load (CPU; kernels/huge_pages.h).
  int64_t huge_page_bytes() const { return huge_page_bytes_; }
  void set_huge_page_bytes(int64_t bytes) { huge_page_bytes_ = bytes; }

 private:
  layers::LlamaDecoder model_;
  int64_t huge_page_bytes_ = 0;
};

// The decoder of the HF folder `hf_dir` for `manifest`'s text section, in `dtype` on `device`.
// Throws era::Error(kBundle) naming the file and the tensor or field.
std::shared_ptr<NativeDecoder> load_native_decoder(const std::string& hf_dir, const Manifest& manifest,
                                                   const torch::Device& device, torch::ScalarType dtype);

}  // namespace era
