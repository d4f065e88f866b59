#include "model/native_decoder.h"

#include <filesystem>
#include <set>
#include <vector>

#include "era/error.h"
#include "model/hf_folder.h"
#include "model/safetensors.h"

namespace era {
namespace {

// config.json's tie_word_embeddings: text_config's where it has one, else the top level's
// (transformers reads both; OneVision's may write it only at the top).
bool ties_embeddings(const std::string& hf_dir) {
  const nlohmann::json config = read_hf_config(hf_dir);
  for (const nlohmann::json* section : {config.contains("text_config") ? &config["text_config"] : nullptr, &config}) {
    if (section && section->is_object() && section->contains("tie_word_embeddings")) {
      const nlohmann::json& tie = (*section)["tie_word_embeddings"];
      if (!tie.is_boolean())
        throw Error(ErrorCode::kBundle, hf_dir + "/config.json: tie_word_embeddings is " + tie.dump() + ", not true or false");
      return tie.get<bool>();
    }
  }
  return false;
}

// The prefix under which this folder keeps the decoder's blocks.
std::string text_prefix(const SafetensorsFolder& folder) {
  for (const char* prefix : {"model.language_model.", "language_model.model.", "model."})
    if (folder.has(std::string(prefix) + "embed_tokens.weight")) return prefix;
  throw Error(ErrorCode::kBundle, folder.folder() +
                                      ": no decoder weights (no tensor model.language_model.embed_tokens.weight, "
                                      "language_model.model.embed_tokens.weight or model.embed_tokens.weight)");
}

}  // namespace

torch::Tensor NativeDecoder::forward(const DecoderCall& c, bool last_only) {
  const auto [x, unused] = model_.run_range(c.x, c.positions, c.cache_pos, c.key_log_bias, c.k_cache, c.v_cache, c.layer_scale,
                                            c.lar_mask, 0, model_.config().num_layers, false);
  return model_.logits(x, last_only);
}

std::pair<torch::Tensor, torch::Tensor> NativeDecoder::forward_with_attention(const DecoderCall& c) {
  const auto [x, attention] = model_.run_range(c.x, c.positions, c.cache_pos, c.key_log_bias, c.k_cache, c.v_cache, c.layer_scale,
                                               c.lar_mask, 0, model_.config().num_layers, true);
  return {model_.logits(x, true), attention};
}

std::pair<torch::Tensor, torch::Tensor> NativeDecoder::run_range(const DecoderCall& c, int64_t begin, int64_t end,
                                                                 bool need_attention) {
  return model_.run_range(c.x, c.positions, c.cache_pos, c.key_log_bias, c.k_cache, c.v_cache, c.layer_scale, c.lar_mask, begin,
                          end, need_attention);
}

int64_t NativeDecoder::weight_bytes() const {
  std::set<const void*> seen;
  int64_t bytes = 0;
  const auto count = [&](const torch::Tensor& t) {
    if (t.defined() && seen.insert(t.data_ptr()).second) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  const auto& w = model_.weights();
  count(w.embed);
  count(w.norm);
  count(w.lm_head);
  for (const auto& l : w.layers)
    for (const auto* t :
         {&l.input_norm, &l.q, &l.k, &l.v, &l.o, &l.q_bias, &l.k_bias, &l.v_bias, &l.post_norm, &l.gate, &l.up, &l.down})
      count(*t);
  return bytes;
}

std::shared_ptr<NativeDecoder> load_native_decoder(const std::string& hf_dir, const Manifest& manifest,
                                                   const torch::Device& device, torch::ScalarType dtype) {
  std::error_code ec;
  if (!std::filesystem::is_directory(hf_dir, ec))
    throw Error(ErrorCode::kBundle, "decoder weights: " + hf_dir + " is not a folder");
  const TextSpec& t = manifest.text;
  const SafetensorsFolder folder(hf_dir);
  const std::string p = text_prefix(folder);
  // a decode step streams every weight once: in huge pages on the CPU, as the bundle's decoder.pt
  // gets them (kernels/huge_pages.h)
  const HfWeightReader w(folder, device, dtype, /*huge_pages=*/true);
  const int64_t D = t.hidden_size, hd = t.head_dim, I = t.intermediate_size;
  const int64_t q_width = t.num_heads * hd, kv_width = t.num_kv_heads * hd;

  layers::DecoderConfig config;
  config.hidden_size = D;
  config.num_layers = t.num_layers;
  config.num_heads = t.num_heads;
  config.num_kv_heads = t.num_kv_heads;
  config.head_dim = hd;
  config.cache_head_dim = t.cache_head_dim;
  config.intermediate_size = I;
  config.vocab_size = t.vocab_size;
  // the manifest's values (bundles of every exporter version write them; 0 = an older one)
  if (t.rms_norm_eps > 0) config.rms_norm_eps = t.rms_norm_eps;
  if (t.rope_theta > 0) config.rope_theta = t.rope_theta;
  config.mrope_section = t.mrope_section;
  config.attention = layers::parse_attention_kernel(manifest.attention.empty() ? "math" : manifest.attention);

  layers::DecoderWeights weights;
  weights.embed = w.read(p + "embed_tokens.weight", {t.vocab_size, D});
  weights.norm = w.read(p + "norm.weight", {D});
  for (int64_t i = 0; i < t.num_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    layers::DecoderLayerWeights lw;
    lw.input_norm = w.read(l + "input_layernorm.weight", {D});
    lw.post_norm = w.read(l + "post_attention_layernorm.weight", {D});
    lw.q = w.read(l + "self_attn.q_proj.weight", {q_width, D});
    lw.k = w.read(l + "self_attn.k_proj.weight", {kv_width, D});
    lw.v = w.read(l + "self_attn.v_proj.weight", {kv_width, D});
    lw.o = w.read(l + "self_attn.o_proj.weight", {D, q_width});
    lw.q_bias = w.bias(l + "self_attn.q_proj.bias", q_width);
    lw.k_bias = w.bias(l + "self_attn.k_proj.bias", kv_width);
    lw.v_bias = w.bias(l + "self_attn.v_proj.bias", kv_width);
    if (lw.q_bias.defined() != lw.k_bias.defined() || lw.q_bias.defined() != lw.v_bias.defined())
      throw Error(ErrorCode::kBundle, folder.file_of(l + "self_attn.q_proj.weight") + ": layer " + std::to_string(i) +
                                          " has biases on some of q_proj, k_proj, v_proj but not all");
    lw.gate = w.read(l + "mlp.gate_proj.weight", {I, D});
    lw.up = w.read(l + "mlp.up_proj.weight", {I, D});
    lw.down = w.read(l + "mlp.down_proj.weight", {D, I});
    weights.layers.push_back(std::move(lw));
  }
  if (folder.has("lm_head.weight")) {
    weights.lm_head = w.read("lm_head.weight", {t.vocab_size, D});
  } else if (folder.has("language_model.lm_head.weight")) {
    weights.lm_head = w.read("language_model.lm_head.weight", {t.vocab_size, D});
  } else if (ties_embeddings(hf_dir)) {
    weights.lm_head = weights.embed;
  } else {
    throw Error(ErrorCode::kBundle, hf_dir +
                                        ": no lm_head.weight, and config.json does not tie the embeddings "
                                        "(tie_word_embeddings)");
  }
  auto decoder = std::make_shared<NativeDecoder>(layers::LlamaDecoder(std::move(config), std::move(weights)));
  decoder->set_huge_page_bytes(w.huge_page_bytes());
  return decoder;
}

}  // namespace era
