#include "family/llava_onevision/onevision_packing.h"

#include <cmath>
#include <string>

#include "era/error.h"

namespace era {
namespace {

// Python's float floor division a // b for b > 0 (CPython float_divmod), so a grid side matches
// transformers' int(curr_height // ratio) even where h / ratio lands next to an integer.
double python_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

}  // namespace

std::array<int64_t, 2> anyres_max_grid(int64_t h, int64_t w, int64_t max_tiles, int64_t p) {
  if (max_tiles <= 0) return {h, w};
  const double ratio = std::sqrt(static_cast<double>(h * w) / static_cast<double>(max_tiles * p * p));
  if (!(ratio > 1.1)) return {h, w};
  return {static_cast<int64_t>(python_floordiv(static_cast<double>(h), ratio)),
          static_cast<int64_t>(python_floordiv(static_cast<double>(w), ratio))};
}

ReducedTokens pack_anyres_max(const torch::Tensor& crops, const AnyresGeometry& geometry, int64_t max_tiles,
                              const torch::Tensor& image_newline) {
  const int64_t p = geometry.patches_per_side, rows = geometry.rows, cols = geometry.cols;
  if (crops.dim() != 3 || crops.size(0) != 1 + rows * cols || crops.size(1) != p * p) {
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres_max: expected [" + std::to_string(1 + rows * cols) + ", " +
                                                 std::to_string(p * p) + ", D] crop tokens");
  }
  const UnpadBox box = unpad_box(geometry);
  const int64_t h = box.bottom - box.top, w = box.right - box.left;
  const auto [nh, nw] = anyres_max_grid(h, w, max_tiles, p);
  if (nh == h && nw == w) {  // no downscale: LLaVA-NeXT's packing of the identity reduction
    ReductionInput all;
    all.embeddings = crops.flatten(0, 1);
    return pack_anyres(FullReducer().reduce(all), geometry, image_newline);
  }
  const int64_t d = crops.size(2);
  // [rows*cols, p*p, D] -> [D, rows*p, cols*p]: HF's view(rows, cols, p, p, D).permute(4, 0, 2, 1, 3)
  torch::Tensor grid = crops.slice(0, 1).reshape({rows, cols, p, p, d}).permute({4, 0, 2, 1, 3}).reshape({d, rows * p, cols * p});
  grid = grid.slice(1, box.top, box.bottom).slice(2, box.left, box.right);
  // torch.nn.functional.interpolate(mode="bilinear") with a size: this kernel, no scale factors
  grid = torch::upsample_bilinear2d(grid.unsqueeze(0), {nh, nw}, /*align_corners=*/false)[0];
  const torch::Tensor newline = image_newline.to(grid.dtype()).to(grid.device()).reshape({d, 1, 1}).expand({d, nh, 1});
  grid = torch::cat({grid, newline}, 2).flatten(1, 2).t();  // [nh * (nw + 1), D], row-major with the newlines

  ReducedTokens out;
  out.embeddings = torch::cat({crops[0], grid}, 0);
  const int64_t k = out.embeddings.size(0);
  out.log_bias = torch::zeros({k}, torch::TensorOptions().dtype(torch::kFloat).device(crops.device()));
  out.kept.assign(static_cast<size_t>(k), -1);
  out.off_grid.assign(static_cast<size_t>(k), false);
  out.assignment.assign(static_cast<size_t>(crops.size(0) * p * p), -1);
  for (int64_t i = 0; i < p * p; ++i) {
    out.kept[static_cast<size_t>(i)] = i;
    out.assignment[static_cast<size_t>(i)] = i;
  }
  for (int64_t r = 0; r < nh; ++r)
    for (int64_t c = 0; c < nw; ++c) out.off_grid[static_cast<size_t>(p * p + r * (nw + 1) + c)] = true;
  return out;
}

ReducedTokens append_newline(ReducedTokens tokens, const torch::Tensor& image_newline) {
  const torch::Tensor row = image_newline.to(tokens.embeddings.dtype()).to(tokens.embeddings.device()).reshape({1, -1});
  const int64_t k = tokens.embeddings.size(0);
  tokens.embeddings = torch::cat({tokens.embeddings, row}, 0);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(tokens.embeddings.device());
  const torch::Tensor bias = tokens.log_bias.defined() ? tokens.log_bias.to(f32) : torch::zeros({k}, f32);
  tokens.log_bias = torch::cat({bias, torch::zeros({1}, f32)});
  tokens.kept.push_back(-1);
  if (!tokens.off_grid.empty()) tokens.off_grid.push_back(false);
  return tokens;
}

namespace {

// [F, side * side, C] -> [F, out * out, C], bilinear on each frame's grid.
torch::Tensor pool_grid(const torch::Tensor& tokens, int64_t side, int64_t out) {
  const int64_t frames = tokens.size(0), channels = tokens.size(2);
  const torch::Tensor grid = tokens.reshape({frames, side, side, channels}).permute({0, 3, 1, 2}).contiguous();
  return torch::upsample_bilinear2d(grid, {out, out}, /*align_corners=*/false)
      .permute({0, 2, 3, 1})
      .reshape({frames, out * out, channels});
}

// [F, H, side * side] saliency rows -> [F, H, out * out]. A tower without a CLS token returns
// empty CLS maps: they stay empty.
torch::Tensor pool_maps(const torch::Tensor& maps, int64_t side, int64_t out) {
  if (!maps.defined() || maps.numel() == 0) return maps;
  return pool_grid(maps.transpose(1, 2), side, out).transpose(1, 2).contiguous();
}

}  // namespace

VisionOutput pool_frames(const VisionOutput& vision, int64_t first, int64_t count, int64_t side, int64_t stride) {
  const int64_t out = (side + stride - 1) / stride;
  const auto frames = [&](const torch::Tensor& t) { return t.slice(0, first, first + count); };
  VisionOutput pooled;
  pooled.embeddings = pool_grid(frames(vision.embeddings), side, out);
  pooled.features = pool_grid(frames(vision.features), side, out);
  pooled.cls_logits = pool_maps(frames(vision.cls_logits), side, out);
  pooled.cls_probs = pool_maps(frames(vision.cls_probs), side, out);
  pooled.mean_logits = pool_maps(frames(vision.mean_logits), side, out);
  pooled.mean_probs = pool_maps(frames(vision.mean_probs), side, out);
  pooled.project = vision.project;
  return pooled;
}

}  // namespace era
