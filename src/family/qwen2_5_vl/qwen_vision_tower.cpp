#include "family/qwen2_5_vl/qwen_vision_tower.h"

#include <cmath>

#include "era/error.h"
#include "layers/rms_norm.h"
#include "layers/rope.h"

namespace era {

using layers::apply_rope;
using layers::linear;
using layers::matmul_f32;
using layers::rms_norm;
using layers::widens;
namespace {

// transformers' get_vision_window_index: the merge units in window order (windows of
// `units` x `units` merge units per temporal slice, the padding dropped) and the window boundaries
// in patches, empty windows left out.
std::pair<torch::Tensor, std::vector<int64_t>> vision_window_order(const torch::Tensor& grid, int64_t merge, int64_t units) {
  const int64_t unit = merge * merge;
  std::vector<torch::Tensor> parts;
  std::vector<int64_t> cu{0};
  int64_t offset = 0;
  const auto opts = torch::TensorOptions().dtype(torch::kLong);
  for (int64_t i = 0; i < grid.size(0); ++i) {
    const int64_t t = grid[i][0].item<int64_t>(), h = grid[i][1].item<int64_t>(), w = grid[i][2].item<int64_t>();
    const int64_t lh = h / merge, lw = w / merge;
    const int64_t pad_h = units - lh % units, pad_w = units - lw % units;
    const int64_t nh = (lh + pad_h) / units, nw = (lw + pad_w) / units;
    torch::Tensor padded = torch::full({t, lh + pad_h, lw + pad_w}, -100, opts);
    padded.slice(1, 0, lh).slice(2, 0, lw).copy_(torch::arange(t * lh * lw, opts).reshape({t, lh, lw}));
    padded = padded.reshape({t, nh, units, nw, units}).permute({0, 1, 3, 2, 4}).reshape({t, nh * nw, units * units});
    const torch::Tensor seqlens = padded.ne(-100).sum(2).reshape(-1);
    const torch::Tensor flat = padded.reshape(-1);
    parts.push_back(flat.masked_select(flat.ne(-100)) + offset);
    const auto* n = seqlens.data_ptr<int64_t>();
    for (int64_t j = 0; j < seqlens.size(0); ++j)
      if (n[j] > 0) cu.push_back(cu.back() + n[j] * unit);
    offset += t * lh * lw;
  }
  return {torch::cat(parts, 0), cu};
}

// (row, column) of every patch in the processor's order: merge blocks in raster order, the patches
// of a block in raster order, repeated per temporal slice.
torch::Tensor vision_patch_positions(const torch::Tensor& grid, int64_t merge) {
  std::vector<torch::Tensor> out;
  const auto opts = torch::TensorOptions().dtype(torch::kLong);
  for (int64_t i = 0; i < grid.size(0); ++i) {
    const int64_t t = grid[i][0].item<int64_t>(), h = grid[i][1].item<int64_t>(), w = grid[i][2].item<int64_t>();
    const auto blocks = [&](const torch::Tensor& p) {
      return p.reshape({h / merge, merge, w / merge, merge}).permute({0, 2, 1, 3}).reshape(-1);
    };
    const torch::Tensor hp = blocks(torch::arange(h, opts).unsqueeze(1).expand({h, w}));
    const torch::Tensor wp = blocks(torch::arange(w, opts).unsqueeze(0).expand({h, w}));
    out.push_back(torch::stack({hp, wp}, -1).repeat({t, 1}));
  }
  return torch::cat(out, 0);
}

}  // namespace

QwenVisionTower::QwenVisionTower(QwenVisionConfig config, QwenVisionWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  if (config_.full_attention.size() != weights_.blocks.size())
    throw Error(ErrorCode::kBundle, "vision tower: " + std::to_string(weights_.blocks.size()) + " blocks but " +
                                        std::to_string(config_.full_attention.size()) + " attention kinds");
  if (config_.window_units <= 0) throw Error(ErrorCode::kBundle, "vision tower: the window must hold a merge unit");
}

layers::VisionTowerOutputs QwenVisionTower::encode_patches(const torch::Tensor& patches, const torch::Tensor& grid_thw) const {
  const QwenVisionConfig& c = config_;
  const int64_t C = c.hidden_size, H = c.num_heads, hd = C / H, merge = c.spatial_merge_size, unit = merge * merge;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const torch::Tensor grid = grid_thw.to(torch::kCPU, torch::kLong).contiguous();
  if (patches.dim() != 2 || grid.dim() != 2 || grid.size(1) != 3)
    throw Error(ErrorCode::kInvalidArgument, "vision: expects patches [Np, D] and grid_thw [n, 3]");
  if ((grid.select(1, 0) * grid.select(1, 1) * grid.select(1, 2)).sum().item<int64_t>() != patches.size(0))
    throw Error(ErrorCode::kInvalidArgument, "vision: grid_thw does not match the number of patches");
  if (grid.select(1, 1).remainder(merge).ne(0).any().item<bool>() || grid.select(1, 2).remainder(merge).ne(0).any().item<bool>())
    throw Error(ErrorCode::kInvalidArgument, "vision: grid height and width must be multiples of the merge size");

  const auto [order_cpu, cu_window] = vision_window_order(grid, merge, c.window_units);
  std::vector<int64_t> cu_full{0};
  for (int64_t i = 0; i < grid.size(0); ++i)
    for (int64_t f = 0; f < grid[i][0].item<int64_t>(); ++f)
      cu_full.push_back(cu_full.back() + grid[i][1].item<int64_t>() * grid[i][2].item<int64_t>());
  const torch::Tensor order = order_cpu.to(patches.device());
  const auto to_window_order = [&](const torch::Tensor& x) {
    return x.reshape({-1, unit, x.size(-1)}).index_select(0, order).reshape({-1, x.size(-1)});
  };

  const torch::Tensor& wp = weights_.patch;
  torch::Tensor x =
      torch::conv3d(patches.reshape({-1, wp.size(1), c.temporal_patch_size, c.patch_size, c.patch_size}).to(wp.scalar_type()), wp,
                    {}, {c.temporal_patch_size, c.patch_size, c.patch_size})
          .reshape({-1, C});
  x = to_window_order(x);
  // 2-D rotary: head_dim / 2 frequencies over the height then the width, in float32
  const torch::Tensor positions = vision_patch_positions(grid, merge).to(patches.device());
  const int64_t half = hd / 2;
  const torch::Tensor exps =
      torch::arange(0, half, 2, torch::TensorOptions().dtype(torch::kLong).device(patches.device())).to(torch::kFloat);
  const torch::Tensor inv_freq = 1.0 / torch::pow(c.rope_theta, exps / static_cast<double>(half));
  const torch::Tensor freqs = (positions.to(torch::kFloat).unsqueeze(-1) * inv_freq).reshape({positions.size(0), -1});
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  const torch::Tensor cos = to_window_order(emb.cos()), sin = to_window_order(emb.sin());

  const int64_t N = x.size(0), blocks = static_cast<int64_t>(weights_.blocks.size());
  torch::Tensor mean_logits, mean_probs;
  for (int64_t b = 0; b < blocks; ++b) {
    const QwenVisionBlockWeights& w = weights_.blocks[static_cast<size_t>(b)];
    const std::vector<int64_t>& cu = c.full_attention[static_cast<size_t>(b)] ? cu_full : cu_window;
    const bool last = b == blocks - 1;
    const torch::Tensor h = rms_norm(x, w.norm1, 1e-6);
    const torch::Tensor qkv = linear(h, w.qkv, w.qkv_bias, routing_.linear).reshape({N, 3, H, hd}).permute({1, 0, 2, 3});
    const torch::Tensor qf = qkv[0].to(torch::kFloat), kf = qkv[1].to(torch::kFloat);
    // in float32, cast back (rows [N, H, d] against cos / sin [N, d])
    const torch::Tensor q = apply_rope(qf, cos, sin).to(x.scalar_type()).transpose(0, 1);  // [H, N, d]
    const torch::Tensor k = apply_rope(kf, cos, sin).to(x.scalar_type()).transpose(0, 1);
    const torch::Tensor v = qkv[2].transpose(0, 1);
    std::vector<torch::Tensor> outs, logits, probs;
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t a = cu[s], n = cu[s + 1] - cu[s];
      const torch::Tensor qs = q.narrow(1, a, n), ks = k.narrow(1, a, n), vs = v.narrow(1, a, n);
      const bool up = widens(qs, n, routing_.upcast_min_rows);
      const torch::Tensor scores = matmul_f32(qs, ks.transpose(-1, -2), up) * scale;
      outs.push_back(matmul_f32(torch::softmax(scores, -1, torch::kFloat).to(vs.scalar_type()), vs, up));
      if (last) {  // the saliency of the segment, in float32, chunk rows at a time
        const torch::Tensor kt = ks.to(torch::kFloat).transpose(-1, -2);
        torch::Tensor logit_sum = torch::zeros({H, n}, kt.options()), prob_sum = torch::zeros({H, n}, kt.options());
        for (int64_t start = 0; start < n; start += c.saliency_chunk) {
          const int64_t rows = std::min(c.saliency_chunk, n - start);
          const torch::Tensor sc = torch::matmul(qs.narrow(1, start, rows).to(torch::kFloat), kt) * scale;
          logit_sum = logit_sum + sc.sum(1);
          prob_sum = prob_sum + torch::softmax(sc, -1).sum(1);
        }
        logits.push_back(logit_sum / static_cast<double>(n));
        probs.push_back(prob_sum / static_cast<double>(n));
      }
    }
    const torch::Tensor out = torch::cat(outs, 1).transpose(0, 1).reshape({N, -1});
    x = x + linear(out, w.proj, w.proj_bias, routing_.linear);
    const torch::Tensor h2 = rms_norm(x, w.norm2, 1e-6);
    const torch::Tensor gated =
        torch::silu(linear(h2, w.gate, w.gate_bias, routing_.linear)) * linear(h2, w.up, w.up_bias, routing_.linear);
    x = x + linear(gated, w.down, w.down_bias, routing_.linear);
    if (last) {
      mean_logits = torch::cat(logits, 1);
      mean_probs = torch::cat(probs, 1);
    }
  }
  const torch::Tensor reverse = torch::argsort(order);
  layers::VisionTowerOutputs o;
  o.features = rms_norm(x, weights_.ln_q, 1e-6).reshape({-1, unit * C}).index_select(0, reverse).unsqueeze(0).contiguous();
  o.mean_logits = mean_logits.reshape({H, -1, unit}).mean(-1).index_select(1, reverse).unsqueeze(0).contiguous();
  o.mean_probs = mean_probs.reshape({H, -1, unit}).sum(-1).index_select(1, reverse).unsqueeze(0).contiguous();
  const auto f32 = torch::TensorOptions().device(patches.device()).dtype(torch::kFloat);
  o.cls_logits = torch::zeros({1, H, 0}, f32);
  o.cls_probs = o.cls_logits;
  o.cls_feature = torch::zeros({1, 0}, f32.dtype(o.features.scalar_type()));
  o.mean_keys = torch::zeros({1, o.features.size(1), 0}, f32);
  return o;
}

int64_t QwenVisionTower::weight_bytes() const {
  int64_t bytes = 0;
  const auto count = [&](const torch::Tensor& t) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  count(weights_.patch);
  count(weights_.ln_q);
  for (const auto& b : weights_.blocks)
    for (const auto* t : {&b.norm1, &b.norm2, &b.qkv, &b.qkv_bias, &b.proj, &b.proj_bias, &b.gate, &b.gate_bias, &b.up,
                          &b.up_bias, &b.down, &b.down_bias})
      count(*t);
  return bytes;
}

}  // namespace era
