#include "family/anyres_packing.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "era/error.h"

namespace era {
namespace {

void check_geometry(const AnyresGeometry& g, const char* where) {
  if (g.original.height <= 0 || g.original.width <= 0 || g.rows <= 0 || g.cols <= 0 || g.patches_per_side <= 0)
    throw Error(ErrorCode::kInvalidArgument, std::string(where) + ": bad anyres geometry (image " +
                                                 std::to_string(g.original.height) + "x" + std::to_string(g.original.width) +
                                                 ", grid " + std::to_string(g.rows) + "x" + std::to_string(g.cols) + ", " +
                                                 std::to_string(g.patches_per_side) + " patches per side)");
}

// Python's int(round(x, 7)) for a finite x >= 0. round(x, 7) is the double nearest to x correctly
// rounded to 7 decimals (CPython: dtoa mode 3, then strtod); glibc's printf("%.7f") rounds the
// exact binary value the same way, and strtod reads it back. int() then truncates toward zero.
int64_t int_round7(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.7f", x);
  return static_cast<int64_t>(std::strtod(buf, nullptr));
}

// Python's a // 2 (floor division) for any sign of a.
int64_t floor_half(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

}  // namespace

UnpadBox unpad_box(const AnyresGeometry& geometry) {
  check_geometry(geometry, "unpad_box");
  const int64_t h = geometry.rows * geometry.patches_per_side;
  const int64_t w = geometry.cols * geometry.patches_per_side;
  const double h0 = static_cast<double>(geometry.original.height);
  const double w0 = static_cast<double>(geometry.original.width);
  UnpadBox box{0, h, 0, w};
  // HF unpad_image: compare aspect ratios as Python floats; trim the padded axis symmetrically.
  // The kept extent is h - 2*pad, which is new_h + 1 when h - new_h is odd.
  if (w0 / h0 > static_cast<double>(w) / static_cast<double>(h)) {
    const int64_t new_h = int_round7(h0 * (static_cast<double>(w) / w0));
    const int64_t pad = floor_half(h - new_h);
    box.top = pad;
    box.bottom = h - pad;
  } else {
    const int64_t new_w = int_round7(w0 * (static_cast<double>(h) / h0));
    const int64_t pad = floor_half(w - new_w);
    box.left = pad;
    box.right = w - pad;
  }
  return box;
}

int64_t anyres_token_count(const AnyresGeometry& geometry) {
  const UnpadBox b = unpad_box(geometry);
  const int64_t p = geometry.patches_per_side;
  return p * p + (b.bottom - b.top) * (b.right - b.left + 1);
}

ReducedTokens concat_crops(const std::vector<ReducedTokens>& per_crop, int64_t tokens_per_crop) {
  if (per_crop.empty()) throw Error(ErrorCode::kInvalidArgument, "concat_crops: no crops");
  if (tokens_per_crop <= 0) throw Error(ErrorCode::kInvalidArgument, "concat_crops: tokens_per_crop must be positive");
  const bool with_entropy = !per_crop.front().entropy.empty();
  bool with_off_grid = false;
  for (const ReducedTokens& r : per_crop) with_off_grid = with_off_grid || !r.off_grid.empty();
  ReducedTokens out;
  std::vector<torch::Tensor> embeddings, biases;
  int64_t slot_offset = 0;
  for (size_t c = 0; c < per_crop.size(); ++c) {
    const ReducedTokens& r = per_crop[c];
    const std::string where = "concat_crops: crop " + std::to_string(c);
    const auto k = static_cast<int64_t>(r.kept.size());
    if (static_cast<int64_t>(r.assignment.size()) != tokens_per_crop)
      throw Error(ErrorCode::kInvalidArgument, where + " has " + std::to_string(r.assignment.size()) + " assignments, expected " +
                                                   std::to_string(tokens_per_crop));
    if (!r.embeddings.defined() || r.embeddings.dim() != 2 || r.embeddings.size(0) != k)
      throw Error(ErrorCode::kInvalidArgument, where + ": embeddings must be [kept, D]");
    if (r.entropy.empty() == with_entropy)
      throw Error(ErrorCode::kInvalidArgument, where + ": entropy present on some crops only");
    if (with_entropy && static_cast<int64_t>(r.entropy.size()) != tokens_per_crop)
      throw Error(ErrorCode::kInvalidArgument, where + ": entropy must have one value per token");
    const int64_t base = static_cast<int64_t>(c) * tokens_per_crop;
    for (int64_t idx : r.kept) {
      if (idx < 0 || idx >= tokens_per_crop)
        throw Error(ErrorCode::kInvalidArgument, where + ": kept index " + std::to_string(idx) + " out of range");
      out.kept.push_back(base + idx);
    }
    for (int64_t a : r.assignment) {
      if (a < -1 || a >= k)
        throw Error(ErrorCode::kInvalidArgument, where + ": assignment " + std::to_string(a) + " out of range");
      out.assignment.push_back(a < 0 ? -1 : a + slot_offset);
    }
    if (with_entropy) out.entropy.insert(out.entropy.end(), r.entropy.begin(), r.entropy.end());
    if (!r.off_grid.empty() && static_cast<int64_t>(r.off_grid.size()) != k)
      throw Error(ErrorCode::kInvalidArgument, where + ": off_grid must be empty or [kept]");
    if (with_off_grid) {
      if (r.off_grid.empty()) {
        out.off_grid.insert(out.off_grid.end(), static_cast<size_t>(k), false);
      } else {
        out.off_grid.insert(out.off_grid.end(), r.off_grid.begin(), r.off_grid.end());
      }
    }
    embeddings.push_back(r.embeddings);
    biases.push_back(r.log_bias.defined()
                         ? r.log_bias.reshape({-1})
                         : torch::zeros({k}, torch::TensorOptions().dtype(torch::kFloat).device(r.embeddings.device())));
    if (biases.back().numel() != k) throw Error(ErrorCode::kInvalidArgument, where + ": log_bias must be [kept]");
    slot_offset += k;
  }
  out.embeddings = torch::cat(embeddings, 0);
  out.log_bias = torch::cat(biases, 0);
  return out;
}

ReducedTokens pack_anyres(const ReducedTokens& joint, const AnyresGeometry& geometry, const torch::Tensor& image_newline) {
  check_geometry(geometry, "pack_anyres");
  const int64_t p = geometry.patches_per_side;
  const int64_t per_crop = p * p;
  const int64_t grid_h = geometry.rows * p;
  const int64_t grid_w = geometry.cols * p;
  const int64_t n = (1 + geometry.rows * geometry.cols) * per_crop;
  const auto k = static_cast<int64_t>(joint.kept.size());

  if (static_cast<int64_t>(joint.assignment.size()) != n)
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres: " + std::to_string(joint.assignment.size()) + " assignments for " +
                                                 std::to_string(n) + " tokens (1 + " + std::to_string(geometry.rows) + "x" +
                                                 std::to_string(geometry.cols) + " crops of " + std::to_string(per_crop) + ")");
  if (!joint.embeddings.defined() || joint.embeddings.dim() != 2 || joint.embeddings.size(0) != k)
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres: embeddings must be [kept, D]");
  const int64_t d = joint.embeddings.size(1);
  if (!image_newline.defined() || image_newline.numel() != d)
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres: image_newline must have " + std::to_string(d) + " values");
  if (joint.log_bias.defined() && joint.log_bias.numel() != k)
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres: log_bias must be [kept]");

  if (!joint.off_grid.empty() && static_cast<int64_t>(joint.off_grid.size()) != k)
    throw Error(ErrorCode::kInvalidArgument, "pack_anyres: off_grid must be empty or [kept]");

  // Which reduced slot sits at each grid position (-1: none); base slots in their kept order;
  // the tiles' off-grid tokens (VisionZip's CLS and contextual tokens) in slot order.
  std::vector<int64_t> base_slots, tail_slots;
  std::vector<int64_t> grid(static_cast<size_t>(grid_h * grid_w), -1);
  for (int64_t s = 0; s < k; ++s) {
    const int64_t idx = joint.kept[s];
    if (idx < 0 || idx >= n)
      throw Error(ErrorCode::kInvalidArgument, "pack_anyres: kept index " + std::to_string(idx) + " out of range");
    if (idx < per_crop) {
      base_slots.push_back(s);
      continue;
    }
    if (!joint.off_grid.empty() && joint.off_grid[static_cast<size_t>(s)]) {
      tail_slots.push_back(s);
      continue;
    }
    const int64_t tile = idx / per_crop - 1, local = idx % per_crop;
    const int64_t gr = (tile / geometry.cols) * p + local / p;
    const int64_t gc = (tile % geometry.cols) * p + local % p;
    int64_t& cell = grid[static_cast<size_t>(gr * grid_w + gc)];
    if (cell >= 0) throw Error(ErrorCode::kInvalidArgument, "pack_anyres: token " + std::to_string(idx) + " kept twice");
    cell = s;
  }

  // The output order: source slot per output position, -1 for a newline.
  const UnpadBox box = unpad_box(geometry);
  std::vector<int64_t> order(base_slots);
  for (int64_t r = box.top; r < box.bottom; ++r) {
    for (int64_t c = box.left; c < box.right; ++c) {
      const int64_t s = grid[static_cast<size_t>(r * grid_w + c)];
      if (s >= 0) order.push_back(s);
    }
    order.push_back(-1);
  }
  // After the grid, as VisionZip's own NeXT layout; not subject to unpad (they stand for no cell).
  order.insert(order.end(), tail_slots.begin(), tail_slots.end());

  const auto m = static_cast<int64_t>(order.size());
  std::vector<int64_t> new_slot(static_cast<size_t>(k), -1);
  std::vector<int64_t> gather(static_cast<size_t>(m)), newline_pos;
  ReducedTokens out;
  out.kept.resize(static_cast<size_t>(m));
  if (!joint.off_grid.empty()) out.off_grid.assign(static_cast<size_t>(m), false);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t s = order[i];
    if (s >= 0) {
      new_slot[s] = i;
      out.kept[i] = joint.kept[s];
      if (!joint.off_grid.empty()) out.off_grid[static_cast<size_t>(i)] = joint.off_grid[static_cast<size_t>(s)];
      gather[i] = s;
    } else {
      out.kept[i] = -1;
      gather[i] = 0;  // placeholder row, overwritten below
      newline_pos.push_back(i);
    }
  }
  out.assignment.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = joint.assignment[i];
    if (a < -1 || a >= k)
      throw Error(ErrorCode::kInvalidArgument, "pack_anyres: assignment " + std::to_string(a) + " out of range");
    out.assignment[i] = a < 0 ? -1 : new_slot[a];
  }
  out.entropy = joint.entropy;

  const auto device = joint.embeddings.device();
  const auto long_opts = torch::TensorOptions().dtype(torch::kLong);
  const torch::Tensor gather_t = torch::tensor(gather, long_opts).to(device);
  const torch::Tensor newline_t = torch::tensor(newline_pos, long_opts).to(device);
  const torch::Tensor bias_in = joint.log_bias.defined()
                                    ? joint.log_bias.reshape({-1})
                                    : torch::zeros({k}, torch::TensorOptions().dtype(torch::kFloat).device(device));

  if (k == 0) {
    // Nothing kept: only newline rows (the placeholder gather index would be out of range).
    out.embeddings = image_newline.reshape({1, d}).to(joint.embeddings.options()).expand({m, d}).contiguous();
    out.log_bias = torch::zeros({m}, bias_in.options());
    return out;
  }
  out.embeddings = joint.embeddings.index_select(0, gather_t);
  out.log_bias = bias_in.index_select(0, gather_t.to(bias_in.device()));
  if (!newline_pos.empty()) {
    const auto rows = static_cast<int64_t>(newline_pos.size());
    const torch::Tensor nl = image_newline.reshape({1, d}).to(joint.embeddings.options()).expand({rows, d}).contiguous();
    out.embeddings.index_copy_(0, newline_t, nl);
    out.log_bias.index_fill_(0, newline_t.to(bias_in.device()), 0.0);
  }
  return out;
}

}  // namespace era
