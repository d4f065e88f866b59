#include "family/llava_native_vision.h"

#include <map>

#include "era/error.h"
#include "family/llava_sections.h"
#include "layers/lar_attention.h"
#include "model/hf_folder.h"
#include "model/native_vision.h"

namespace era {
namespace {

using json = nlohmann::json;

// What the manifest does not say of the tower, from config.json's vision_config (transformers'
// class defaults where a field is absent), checked against the manifest's has_cls.
struct TowerKind {
  double layer_norm_eps = 1e-5;
  bool tanh_gelu = false;
};

TowerKind tower_kind(const std::string& hf_dir, const VisionSpec& v) {
  const json config = read_hf_config(hf_dir);
  const std::string where = hf_dir + "/config.json: vision_config";
  const json vc =
      config.contains("vision_config") && config["vision_config"].is_object() ? config["vision_config"] : json::object();
  const std::string type = vc.value("model_type", v.has_cls ? "clip_vision_model" : "siglip_vision_model");
  const bool clip = type == "clip_vision_model";
  if (!clip && type != "siglip_vision_model")
    throw Error(ErrorCode::kBundle, where + ".model_type = \"" + type +
                                        "\": not a tower era runs natively "
                                        "(clip_vision_model, siglip_vision_model)");
  if (clip != v.has_cls)
    throw Error(ErrorCode::kBundle, where + ".model_type = \"" + type + "\": the bundle's manifest says vision.has_cls = " +
                                        (v.has_cls ? "true" : "false") + " (another model)");
  TowerKind kind;
  kind.tanh_gelu = !clip;
  const std::string act = vc.value("hidden_act", clip ? "quick_gelu" : "gelu_pytorch_tanh");
  if (act != (clip ? "quick_gelu" : "gelu_pytorch_tanh"))
    throw Error(ErrorCode::kBundle, where + ".hidden_act = \"" + act + "\": not supported for " + type);
  kind.layer_norm_eps = clip ? 1e-5 : 1e-6;
  if (vc.contains("layer_norm_eps")) {
    if (!vc["layer_norm_eps"].is_number() || vc["layer_norm_eps"].get<double>() <= 0)
      throw Error(ErrorCode::kBundle, where + ".layer_norm_eps = " + vc["layer_norm_eps"].dump() + ": must be a positive number");
    kind.layer_norm_eps = vc["layer_norm_eps"].get<double>();
  }
  return kind;
}

}  // namespace

std::shared_ptr<VisionBackend> load_llava_native_vision(const std::string& hf_dir, const Manifest& m, const torch::Device& device,
                                                        torch::ScalarType dtype) {
  const VisionSpec& v = m.vision;
  const TowerKind kind = tower_kind(hf_dir, v);
  const SafetensorsFolder folder(hf_dir);
  // out of the file's mapping into huge pages on the CPU, as the decoder's: the products stream them,
  // and a fused q/k/v (layers/vit_tower.h) then frees what it was made from
  const HfWeightReader w(folder, device, dtype, /*huge_pages=*/true);
  const std::string p =
      w.prefix_of({"model.vision_tower.vision_model.", "vision_tower.vision_model.", "model.vision_tower.", "vision_tower."},
                  "embeddings.patch_embedding.weight");
  if (p.empty())
    throw Error(ErrorCode::kBundle, hf_dir +
                                        ": no vision tower weights (no tensor "
                                        "model.vision_tower.vision_model.embeddings.patch_embedding.weight or "
                                        "vision_tower.vision_model.embeddings.patch_embedding.weight)");
  const int64_t C = v.hidden_size, I = v.mlp_width(), P = v.patch_size;

  layers::ViTConfig config;
  config.hidden_size = C;
  config.num_heads = v.num_heads;
  config.patch_size = P;
  config.layer_norm_eps = kind.layer_norm_eps;
  config.has_cls = v.has_cls;
  config.tanh_gelu = kind.tanh_gelu;
  for (const int64_t k : v.feature_layers) config.feature_indices.push_back(k < 0 ? v.num_layers + 1 + k : k);
  config.first_token = v.select_strategy == "full" ? 0 : 1;
  config.sdpa = layers::parse_attention_kernel(m.attention.empty() ? "math" : m.attention) == layers::AttentionKernel::kSdpa;

  layers::ViTWeights weights;
  weights.patch = w.read(p + "embeddings.patch_embedding.weight", {C, 3, P, P});
  weights.patch_bias = w.bias(p + "embeddings.patch_embedding.bias", C);
  if (v.has_cls) {
    weights.class_embedding = w.read(p + "embeddings.class_embedding", {C});
    weights.pre_norm_w = w.read(p + "pre_layrnorm.weight", {C});
    weights.pre_norm_b = w.read(p + "pre_layrnorm.bias", {C});
  }
  weights.position = w.read(p + "embeddings.position_embedding.weight", {v.num_patches + (v.has_cls ? 1 : 0), C});
  for (int64_t i = 0; i < v.layers_run; ++i) {
    const std::string l = p + "encoder.layers." + std::to_string(i) + ".";
    layers::ViTLayerWeights lw;
    lw.norm1_w = w.read(l + "layer_norm1.weight", {C});
    lw.norm1_b = w.read(l + "layer_norm1.bias", {C});
    lw.q = w.read(l + "self_attn.q_proj.weight", {C, C});
    lw.q_bias = w.read(l + "self_attn.q_proj.bias", {C});
    lw.k = w.read(l + "self_attn.k_proj.weight", {C, C});
    lw.k_bias = w.read(l + "self_attn.k_proj.bias", {C});
    lw.v = w.read(l + "self_attn.v_proj.weight", {C, C});
    lw.v_bias = w.read(l + "self_attn.v_proj.bias", {C});
    lw.o = w.read(l + "self_attn.out_proj.weight", {C, C});
    lw.o_bias = w.read(l + "self_attn.out_proj.bias", {C});
    lw.norm2_w = w.read(l + "layer_norm2.weight", {C});
    lw.norm2_b = w.read(l + "layer_norm2.bias", {C});
    lw.fc1 = w.read(l + "mlp.fc1.weight", {I, C});
    lw.fc1_bias = w.read(l + "mlp.fc1.bias", {I});
    lw.fc2 = w.read(l + "mlp.fc2.weight", {C, I});
    lw.fc2_bias = w.read(l + "mlp.fc2.bias", {C});
    weights.layers.push_back(std::move(lw));
  }

  const std::string pp = w.prefix_of({"model.multi_modal_projector.", "multi_modal_projector."}, "linear_1.weight");
  if (pp.empty())
    throw Error(ErrorCode::kBundle, hf_dir +
                                        ": no projector weights (no tensor model.multi_modal_projector.linear_1.weight "
                                        "or multi_modal_projector.linear_1.weight)");
  layers::MlpProjector projector;
  const int64_t D = m.projector_out;
  projector.w1 = w.read(pp + "linear_1.weight", {D, m.projector_in});
  projector.b1 = w.bias(pp + "linear_1.bias", D);
  projector.w2 = w.read(pp + "linear_2.weight", {D, D});
  projector.b2 = w.bias(pp + "linear_2.bias", D);

  std::map<std::string, torch::Tensor> parameters;
  if (read_llava_sections(m).image.layout == ImageLayout::kAnyres) {
    const std::string newline = w.prefix_of({"model.", ""}, "image_newline");
    if (!folder.has(newline + "image_newline"))
      throw Error(ErrorCode::kBundle, hf_dir +
                                          ": no tensor model.image_newline or image_newline (an anyres model's "
                                          "row separator)");
    parameters["image_newline"] = w.read(newline + "image_newline", {D});
  }
  return std::make_shared<NativeVision>(std::make_unique<layers::ViTTower>(std::move(config), std::move(weights)),
                                        std::move(projector), std::move(parameters));
}

}  // namespace era
