#include "layers/vit_tower.h"

#include <algorithm>
#include <cmath>

#include "era/error.h"
#include "kernels/cpu_widened_attention.h"
#include "util/compat.h"

namespace era::layers {
namespace {

// x * sigmoid(1.702 x) with HF CLIP's three roundings, in one buffer (as the exported quick_gelu).
torch::Tensor quick_gelu(const torch::Tensor& x) {
  torch::Tensor t = x.mul(1.702);
  t.sigmoid_();
  return t.mul_(x);
}

torch::Tensor sdpa_all_keys(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
#if ERA_TORCH_AT_LEAST(2, 1)
  return at::scaled_dot_product_attention(q, k, v, c10::nullopt, 0.0, false, scale);
#else
  (void)q, (void)k, (void)v, (void)scale;
  throw Error(ErrorCode::kInvalidArgument, "vision attention 'sdpa' needs LibTorch >= 2.1");
#endif
}

}  // namespace

ViTTower::ViTTower(ViTConfig config, ViTWeights weights) : config_(std::move(config)), weights_(std::move(weights)) {
  if (config_.feature_indices.empty()) throw Error(ErrorCode::kBundle, "vision tower: no feature layer selected");
  const int64_t deepest = *std::max_element(config_.feature_indices.begin(), config_.feature_indices.end());
  if (deepest != static_cast<int64_t>(weights_.layers.size()))
    throw Error(ErrorCode::kBundle, "vision tower: " + std::to_string(weights_.layers.size()) +
                                        " layers given, the deepest feature layer needs " + std::to_string(deepest));
}

torch::Tensor ViTTower::layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  const std::vector<int64_t> shape{x.size(-1)};
  if (routing_.layer_norm_f32 && x.scalar_type() != torch::kFloat && x.device().is_cpu())
    return torch::layer_norm(x.to(torch::kFloat), shape, w.to(torch::kFloat), b.to(torch::kFloat), config_.layer_norm_eps)
        .to(x.scalar_type());
  return torch::layer_norm(x, shape, w, b, config_.layer_norm_eps);
}

// softmax(Q K^T * scale) V over every token, the softmax in float32: the exported cores
// (VisionMathCore, VisionSdpaCore) call for call.
torch::Tensor ViTTower::attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const bool up = widens(q, q.size(2), routing_.upcast_min_rows);
  if (!config_.sdpa) {
    if (up || routing_.per_head_kernel) return widened_attention(q, k, v, scale, 0, false);
    const torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) * scale;
    return torch::matmul(torch::softmax(scores.to(torch::kFloat), -1).to(v.scalar_type()), v);
  }
  if (up) return sdpa_all_keys(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), scale).to(q.scalar_type());
  if (routing_.per_head_kernel) return widened_attention(q, k, v, scale, 0, false);
  return sdpa_all_keys(q, k, v, scale);
}

VisionTowerOutputs ViTTower::encode_crops(const torch::Tensor& pixels) const {
  const ViTWeights& w = weights_;
  const int64_t C = config_.hidden_size, H = config_.num_heads, hd = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const auto bias = [](const torch::Tensor& b) { return b.defined() ? c10::optional<torch::Tensor>(b) : c10::nullopt; };

  torch::Tensor x = torch::conv2d(pixels.to(w.patch.scalar_type()), w.patch, bias(w.patch_bias), config_.patch_size);
  x = x.flatten(2).transpose(1, 2);  // [B, N, C], raster order
  const int64_t B = x.size(0);
  if (config_.has_cls) x = torch::cat({w.class_embedding.view({1, 1, -1}).expand({B, 1, C}), x}, 1);
  x = x + w.position.unsqueeze(0);
  if (w.pre_norm_w.defined()) x = layer_norm(x, w.pre_norm_w, w.pre_norm_b);

  const int64_t run = static_cast<int64_t>(w.layers.size());
  std::vector<torch::Tensor> states;
  VisionTowerOutputs out;
  for (int64_t i = 0; i < run; ++i) {
    const ViTLayerWeights& l = w.layers[static_cast<size_t>(i)];
    const torch::Tensor h = layer_norm(x, l.norm1_w, l.norm1_b);
    const int64_t N = h.size(1);
    const auto heads = [&](const torch::Tensor& t) { return t.view({B, N, H, hd}).transpose(1, 2); };
    torch::Tensor q, k, v;
    if (l.qkv.defined()) {
      const auto parts = linear(h, l.qkv, l.qkv_bias, routing_.linear).split(C, -1);
      q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    } else {
      q = heads(linear(h, l.q, l.q_bias, routing_.linear));
      k = heads(linear(h, l.k, l.k_bias, routing_.linear));
      v = heads(linear(h, l.v, l.v_bias, routing_.linear));
    }
    if (i == run - 1) {  // the saliency of the deepest layer, in float32 from the model-dtype q / k
      const torch::Tensor kf = k.to(torch::kFloat).transpose(-1, -2);
      const torch::Tensor full = torch::matmul(q.to(torch::kFloat), kf) * scale;  // [B, H, N, N]
      const int64_t first = config_.has_cls ? 1 : 0;  // the CLS query row and key column leave the readout
      out.mean_logits = full.slice(2, first).slice(3, first).mean(2).contiguous();
      out.mean_probs = torch::softmax(full, -1).slice(2, first).slice(3, first).mean(2).contiguous();
      out.mean_keys = k.to(torch::kFloat).mean(1).contiguous();
      if (config_.has_cls) {
        const torch::Tensor cls = torch::matmul(q.slice(2, 0, 1).to(torch::kFloat), kf).squeeze(2) * scale;
        out.cls_logits = cls.slice(2, 1).contiguous();
        out.cls_probs = torch::softmax(cls, -1).slice(2, 1).contiguous();
      } else {
        out.cls_logits = torch::zeros({B, H, 0}, full.options());
        out.cls_probs = out.cls_logits;
      }
    }
    const torch::Tensor attended = attention_core(q, k, v).transpose(1, 2).reshape({B, N, C});
    x = x + linear(attended, l.o, l.o_bias, routing_.linear);
    const torch::Tensor inner = linear(layer_norm(x, l.norm2_w, l.norm2_b), l.fc1, l.fc1_bias, routing_.linear);
    const torch::Tensor act = config_.tanh_gelu ? torch::gelu(inner, "tanh") : quick_gelu(inner);
    x = x + linear(act, l.fc2, l.fc2_bias, routing_.linear);
    states.push_back(x);
  }
  std::vector<torch::Tensor> selected;
  for (const int64_t k : config_.feature_indices) selected.push_back(states[static_cast<size_t>(k - 1)]);
  const torch::Tensor features = selected.size() == 1 ? selected.front() : torch::cat(selected, -1);
  out.features = features.slice(1, config_.first_token).contiguous();
  out.cls_feature = config_.has_cls ? x.select(1, 0).contiguous() : torch::zeros({B, 0}, x.options());
  return out;
}

int ViTTower::linear_count() const {
  int n = 0;
  for (const ViTLayerWeights& l : weights_.layers) n += l.qkv.defined() ? 4 : 6;
  return n;
}

void ViTTower::set_routing(const VisionRouting& routing) {
  routing_ = routing;
  if (!routing.linear.onednn) return;
  const int64_t C = config_.hidden_size;
  for (ViTLayerWeights& l : weights_.layers) {
    if (l.qkv.defined()) continue;
    l.qkv = torch::cat({l.q, l.k, l.v}, 0);
    l.qkv_bias = torch::cat({l.q_bias, l.k_bias, l.v_bias}, 0);
    l.q = l.qkv.narrow(0, 0, C), l.k = l.qkv.narrow(0, C, C), l.v = l.qkv.narrow(0, 2 * C, C);
    l.q_bias = l.qkv_bias.narrow(0, 0, C), l.k_bias = l.qkv_bias.narrow(0, C, C), l.v_bias = l.qkv_bias.narrow(0, 2 * C, C);
  }
}

int64_t ViTTower::weight_bytes() const {
  int64_t bytes = 0;
  const auto count = [&](const torch::Tensor& t) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  const ViTWeights& w = weights_;
  for (const auto* t : {&w.patch, &w.patch_bias, &w.class_embedding, &w.position, &w.pre_norm_w, &w.pre_norm_b}) count(*t);
  for (const auto& l : w.layers) {
    // fused: q / k / v are views of qkv, counted once
    for (const auto* t : l.qkv.defined() ? std::vector<const torch::Tensor*>{&l.qkv, &l.qkv_bias}
                                         : std::vector<const torch::Tensor*>{&l.q, &l.q_bias, &l.k, &l.k_bias, &l.v, &l.v_bias})
      count(*t);
    for (const auto* t :
         {&l.norm1_w, &l.norm1_b, &l.o, &l.o_bias, &l.norm2_w, &l.norm2_b, &l.fc1, &l.fc1_bias, &l.fc2, &l.fc2_bias})
      count(*t);
  }
  return bytes;
}

VisionTowerOutputs VisionTower::encode_crops(const torch::Tensor&) const {
  throw Error(ErrorCode::kInvalidArgument, "this model's vision tower takes native-resolution patches, not crops");
}

VisionTowerOutputs VisionTower::encode_patches(const torch::Tensor&, const torch::Tensor&) const {
  throw Error(ErrorCode::kInvalidArgument, "this model's vision tower takes fixed-size crops, not patches");
}

torch::Tensor MlpProjector::operator()(const torch::Tensor& features) const {
  return linear(torch::gelu(linear(features, w1, b1, routing)), w2, b2, routing);
}

}  // namespace era::layers
