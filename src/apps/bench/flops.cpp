#include "apps/bench/flops.h"

#include <algorithm>

#include "era/error.h"
#include "model/manifest.h"

namespace era::bench {

ModelDims read_model_dims(const std::string& bundle_dir) {
  return model_dims(read_manifest(bundle_dir));  // validates; throws era::Error(kBundle)
}

ModelDims model_dims(const Manifest& manifest) {
  ModelDims m;
  const auto& v = manifest.vision;
  const auto& t = manifest.text;
  m.image_size = v.image_size;
  m.patch_size = v.patch_size;
  m.num_patches = v.num_patches;
  m.vision_hidden = v.hidden_size;
  m.vision_layers_run = v.layers_run;
  m.vision_intermediate = v.mlp_width();
  m.vision_cost = vision_cost(manifest);
  m.hidden = t.hidden_size;
  m.intermediate = t.intermediate_size;
  m.layers = t.num_layers;
  m.heads = t.num_heads;
  m.kv_heads = t.num_kv_heads;
  m.head_dim = t.head_dim;
  m.vocab = t.vocab_size;
  return m;
}

namespace {
// Weight multiply-adds of one token through one decoder layer: q, k, v, o projections and the
// gated MLP (gate, up, down).
double layer_weights(const ModelDims& m) {
  const double D = m.hidden, Hd = static_cast<double>(m.heads) * m.head_dim, Hkvd = static_cast<double>(m.kv_heads) * m.head_dim,
               F = m.intermediate;
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

double prefill_flops(const ModelDims& m, int64_t prompt_tokens) {
  return m.layers * prefill_layer(m, prompt_tokens) + lm_head(m);
}

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
  if (!m.vision_cost.vision || !m.vision_cost.projector) {
    throw Error(ErrorCode::kInvalidArgument,
                "count_flops: the model's vision FLOP formulas are not set (read_model_dims sets them)");
  }
  f.vision = m.vision_cost.vision(crops, grids);
  f.projector = m.vision_cost.projector(crops, grids);
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
