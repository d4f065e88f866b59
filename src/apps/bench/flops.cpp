#include "apps/bench/flops.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/manifest.h"

namespace era::bench {

ModelDims read_model_dims(const std::string& bundle_dir) {
  const Manifest manifest = read_manifest(bundle_dir);  // validates; throws era::Error(kBundle)
  ModelDims m;
  const auto& v = manifest.vision;
  const auto& t = manifest.text;
  m.image_size = v.image_size;
  m.patch_size = v.patch_size;
  m.num_patches = v.num_patches;
  m.vision_hidden = v.hidden_size;
  m.vision_layers_run = v.layers_run;
  m.vision_intermediate = 4 * v.hidden_size;  // CLIP's ratio, for bundles that do not record it
  std::ifstream in(bundle_dir + "/manifest.json");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("vision") && j["vision"].is_object()) {
    const auto& vj = j["vision"];
    if (vj.contains("intermediate_size") && vj["intermediate_size"].is_number_integer()) {
      m.vision_intermediate = vj["intermediate_size"].get<int64_t>();
    }
    // (read_manifest has validated the section; the window fields are the exporter's own)
    if (manifest.image.layout == ImageLayout::kNative) {
      m.native = true;
      m.temporal_patch = v.temporal_patch_size;
      m.merge = v.spatial_merge_size;
      m.vision_layers_run = v.num_layers;
      const int64_t window = vj.value("window_size", int64_t{0});
      m.window_units = window / std::max<int64_t>(1, v.spatial_merge_size * v.patch_size);
      m.vision_full_layers = vj.contains("fullatt_block_indexes") && vj["fullatt_block_indexes"].is_array()
                                 ? static_cast<int64_t>(vj["fullatt_block_indexes"].size())
                                 : 0;
    }
  }
  m.hidden = t.hidden_size;
  m.intermediate = t.intermediate_size;
  m.layers = t.num_layers;
  m.heads = t.num_heads;
  m.kv_heads = t.num_kv_heads;
  m.head_dim = t.head_dim;
  m.vocab = t.vocab_size;
  return m;
}

double vision_flops_per_crop(const ModelDims& m) {
  const double C = m.vision_hidden, I = m.vision_intermediate, P = m.patch_size;
  const double N = m.num_patches + 1;  // + CLS
  const double patch_embed = 2.0 * m.num_patches * (3 * P * P) * C;
  const double per_layer = 2.0 * N * (4 * C * C + 2 * C * I) + 4.0 * N * N * C;
  return patch_embed + m.vision_layers_run * per_layer;
}

double native_vision_flops(const ModelDims& m, const std::vector<std::array<int64_t, 3>>& grids) {
  const double C = m.vision_hidden, I = m.vision_intermediate, P = m.patch_size;
  double patches = 0, window_sq = 0, slice_sq = 0;  // sums of segment sizes squared
  const auto span = [](int64_t n, int64_t size, int64_t i) { return std::min(size, n - i * size); };
  for (const auto& [t, h, w] : grids) {
    patches += static_cast<double>(t * h * w);
    slice_sq += static_cast<double>(t) * static_cast<double>(h * w) * static_cast<double>(h * w);
    const int64_t lh = h / m.merge, lw = w / m.merge, u = std::max<int64_t>(1, m.window_units);
    for (int64_t r = 0; r * u < lh; ++r)
      for (int64_t c = 0; c * u < lw; ++c) {
        const double s = static_cast<double>(span(lh, u, r) * span(lw, u, c) * m.merge * m.merge);
        window_sq += static_cast<double>(t) * s * s;
      }
  }
  const int64_t full = std::min(m.vision_full_layers, m.vision_layers_run);
  const double dense = 2.0 * patches * (4 * C * C + 3 * C * I);
  return 2.0 * patches * (3 * m.temporal_patch * P * P) * C +
         static_cast<double>(m.vision_layers_run) * dense + 4.0 * C * (static_cast<double>(full) * slice_sq +
                                                                        static_cast<double>(m.vision_layers_run - full) * window_sq);
}

double native_projector_flops(const ModelDims& m, const std::vector<std::array<int64_t, 3>>& grids) {
  double tokens = 0;
  for (const auto& [t, h, w] : grids) tokens += static_cast<double>(t * (h / m.merge) * (w / m.merge));
  const double in = static_cast<double>(m.vision_hidden * m.merge * m.merge), D = m.hidden;
  return 2.0 * tokens * (in * in + in * D);
}

double projector_flops_per_crop(const ModelDims& m) {
  const double C = m.vision_hidden, D = m.hidden;
  return 2.0 * m.num_patches * (C * D + D * D);
}

namespace {
// Weight multiply-adds of one token through one decoder layer: q, k, v, o projections and the
// gated MLP (gate, up, down).
double layer_weights(const ModelDims& m) {
  const double D = m.hidden, Hd = static_cast<double>(m.heads) * m.head_dim,
               Hkvd = static_cast<double>(m.kv_heads) * m.head_dim, F = m.intermediate;
  return 2 * D * Hd + 2 * D * Hkvd + 3 * D * F;
}
double lm_head_weights(const ModelDims& m) { return static_cast<double>(m.hidden) * m.vocab; }
double lm_head(const ModelDims& m) { return 2.0 * lm_head_weights(m); }
double prefill_layer(const ModelDims& m, int64_t prompt_tokens) {
  const double T = prompt_tokens, Hd = static_cast<double>(m.heads) * m.head_dim;
  return 2.0 * T * layer_weights(m) + 4.0 * Hd * T * (T + 1) / 2;
}
double decode_layer(const ModelDims& m, int64_t context) {
  const double Hd = static_cast<double>(m.heads) * m.head_dim;
  return 2.0 * layer_weights(m) + 4.0 * Hd * context;
}
}  // namespace

double prefill_flops(const ModelDims& m, int64_t prompt_tokens) { return m.layers * prefill_layer(m, prompt_tokens) + lm_head(m); }

double decode_step_flops(const ModelDims& m, int64_t context) { return m.layers * decode_layer(m, context) + lm_head(m); }

double decode_step_weights(const ModelDims& m) { return m.layers * layer_weights(m) + lm_head_weights(m); }

double FlopCount::total() const {
  return vision + projector + prefill + decode_per_token * static_cast<double>(generated > 0 ? generated - 1 : 0);
}

FlopCount count_flops(const ModelDims& m, int64_t crops, int64_t prompt_tokens, int64_t generated, const EarlyLayers& early,
                      const std::vector<std::array<int64_t, 3>>& grids) {
  const int64_t k = std::clamp<int64_t>(early.layers, 0, m.layers);
  const int64_t early_tokens = k > 0 ? early.prompt_tokens : prompt_tokens;
  FlopCount f;
  f.vision = m.native ? native_vision_flops(m, grids) : crops * vision_flops_per_crop(m);
  f.projector = m.native ? native_projector_flops(m, grids) : crops * projector_flops_per_crop(m);
  f.prefill = k * prefill_layer(m, early_tokens) + (m.layers - k) * prefill_layer(m, prompt_tokens) + lm_head(m);
  f.generated = generated;
  const int64_t steps = generated > 0 ? generated - 1 : 0;
  if (steps > 0) {
    double sum = 0;
    for (int64_t s = 1; s <= steps; ++s) {
      sum += k * decode_layer(m, early_tokens + s) + (m.layers - k) * decode_layer(m, prompt_tokens + s) + lm_head(m);
    }
    f.decode_per_token = sum / static_cast<double>(steps);
  }
  return f;
}

}  // namespace era::bench
