#include "family/qwen2_5_vl/qwen_native_vision.h"

#include "era/error.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "family/qwen2_5_vl/qwen_vision_tower.h"
#include "model/hf_folder.h"
#include "model/native_vision.h"

namespace era {
namespace {

using json = nlohmann::json;

// vision_config's rotary base (rope_parameters.rope_theta; transformers' 10000 where absent), its
// activation checked.
double vision_rope_theta(const std::string& hf_dir) {
  const json config = read_hf_config(hf_dir);
  const std::string where = hf_dir + "/config.json: vision_config";
  const json vc =
      config.contains("vision_config") && config["vision_config"].is_object() ? config["vision_config"] : json::object();
  const std::string act = vc.value("hidden_act", "silu");
  if (act != "silu") throw Error(ErrorCode::kBundle, where + ".hidden_act = \"" + act + "\": not supported (silu)");
  double theta = 10000.0;
  if (vc.contains("rope_parameters") && vc["rope_parameters"].is_object() && vc["rope_parameters"].contains("rope_theta")) {
    const json& t = vc["rope_parameters"]["rope_theta"];
    if (!t.is_number() || t.get<double>() <= 0)
      throw Error(ErrorCode::kBundle, where + ".rope_parameters.rope_theta = " + t.dump() + ": must be a positive number");
    theta = t.get<double>();
  }
  return theta;
}

}  // namespace

std::shared_ptr<VisionBackend> load_qwen25vl_native_vision(const std::string& hf_dir, const Manifest& m,
                                                           const torch::Device& device, torch::ScalarType dtype) {
  const VisionSpec& v = m.vision;
  const Qwen25VlSections s = read_qwen25vl_sections(m);
  if (s.window_size <= 0 || !s.fullatt_block_indexes)
    throw Error(ErrorCode::kBundle, "bundle manifest " + m.source +
                                        ": vision.window_size and vision.fullatt_block_indexes "
                                        "are needed for era's native tower (re-export the bundle with this version)");
  QwenVisionConfig config;
  config.hidden_size = v.hidden_size;
  config.num_heads = v.num_heads;
  config.patch_size = v.patch_size;
  config.temporal_patch_size = s.temporal_patch_size;
  config.spatial_merge_size = s.spatial_merge_size;
  config.window_units = s.window_size / s.spatial_merge_size / v.patch_size;
  config.full_attention.assign(static_cast<size_t>(v.num_layers), false);
  for (const int64_t i : *s.fullatt_block_indexes)
    if (i >= 0 && i < v.num_layers) config.full_attention[static_cast<size_t>(i)] = true;
  config.rope_theta = vision_rope_theta(hf_dir);

  const SafetensorsFolder folder(hf_dir);
  // out of the file's mapping into huge pages on the CPU, as the decoder's: the products stream them,
  // and a fused q/k/v (layers/vit_tower.h) then frees what it was made from
  const HfWeightReader w(folder, device, dtype, /*huge_pages=*/true);
  const std::string p = w.prefix_of({"model.visual.", "visual."}, "patch_embed.proj.weight");
  if (p.empty())
    throw Error(ErrorCode::kBundle, hf_dir +
                                        ": no vision tower weights (no tensor model.visual.patch_embed.proj.weight "
                                        "or visual.patch_embed.proj.weight)");
  const int64_t C = v.hidden_size, I = v.mlp_width();
  QwenVisionWeights weights;
  weights.patch = w.read(p + "patch_embed.proj.weight", {C, 3, s.temporal_patch_size, v.patch_size, v.patch_size});
  for (int64_t i = 0; i < v.num_layers; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    QwenVisionBlockWeights bw;
    bw.norm1 = w.read(b + "norm1.weight", {C});
    bw.norm2 = w.read(b + "norm2.weight", {C});
    bw.qkv = w.read(b + "attn.qkv.weight", {3 * C, C});
    bw.qkv_bias = w.read(b + "attn.qkv.bias", {3 * C});
    bw.proj = w.read(b + "attn.proj.weight", {C, C});
    bw.proj_bias = w.read(b + "attn.proj.bias", {C});
    bw.gate = w.read(b + "mlp.gate_proj.weight", {I, C});
    bw.gate_bias = w.read(b + "mlp.gate_proj.bias", {I});
    bw.up = w.read(b + "mlp.up_proj.weight", {I, C});
    bw.up_bias = w.read(b + "mlp.up_proj.bias", {I});
    bw.down = w.read(b + "mlp.down_proj.weight", {C, I});
    bw.down_bias = w.read(b + "mlp.down_proj.bias", {C});
    weights.blocks.push_back(std::move(bw));
  }
  weights.ln_q = w.read(p + "merger.ln_q.weight", {C});
  // the merger MLP keeps its input width inside (4C -> 4C -> D)
  layers::MlpProjector projector;
  const int64_t in = m.projector_in, D = m.projector_out;
  projector.w1 = w.read(p + "merger.mlp.0.weight", {in, in});
  projector.b1 = w.bias(p + "merger.mlp.0.bias", in);
  projector.w2 = w.read(p + "merger.mlp.2.weight", {D, in});
  projector.b2 = w.bias(p + "merger.mlp.2.bias", D);
  return std::make_shared<NativeVision>(std::make_unique<QwenVisionTower>(std::move(config), std::move(weights)),
                                        std::move(projector));
}

}  // namespace era
