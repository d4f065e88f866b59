// LLaVA-NeXT packing: the unpad box against HF's unpad_image applied to real tensors (and the
// int(round(x, 7)) rule against plain int()), the token counts of llava.md A.6, pack_anyres with
// the identity reduction against a plain tensor implementation of HF's packing, and with random
// per-crop reductions (order, newlines, biases, clusters dropped by unpad).
#include "family/anyres_packing.h"

#include <gtest/gtest.h>

#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "era/error.h"

namespace era {
namespace {

constexpr int64_t kP = 24;  // patches per tile side

std::vector<Resolution> packing_pinpoints() { return {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}}; }

AnyresGeometry geometry_for(int64_t h, int64_t w) {
  const Resolution best = select_best_resolution({h, w}, packing_pinpoints());
  AnyresGeometry g;
  g.original = {h, w};
  g.rows = best.height / 336;
  g.cols = best.width / 336;
  g.patches_per_side = kP;
  return g;
}

std::string name_of(const AnyresGeometry& g) {
  return std::to_string(g.original.height) + "x" + std::to_string(g.original.width) + " grid " + std::to_string(g.rows) + "x" +
         std::to_string(g.cols);
}

// HF's unpad_image written out on a [C, h, w] tensor. `use_round`: int(round(x, 7)) (HF) or int(x)
// (the original LLaVA). For these rational values (denominators below 10^4), rounding x * 1e7 to
// the nearest integer agrees with Python's correctly rounded round(x, 7).
torch::Tensor hf_unpad(const torch::Tensor& t, int64_t h0, int64_t w0, bool use_round = true) {
  const int64_t h = t.size(1), w = t.size(2);
  auto to_int = [&](double x) { return use_round ? static_cast<int64_t>(std::round(x * 1e7) / 1e7) : static_cast<int64_t>(x); };
  if (static_cast<double>(w0) / h0 > static_cast<double>(w) / h) {
    const int64_t new_h = to_int(h0 * (static_cast<double>(w) / w0));
    const int64_t pad = (h - new_h) / 2;
    return t.slice(1, pad, h - pad);
  }
  const int64_t new_w = to_int(w0 * (static_cast<double>(h) / h0));
  const int64_t pad = (w - new_w) / 2;
  return t.slice(2, pad, w - pad);
}

// The box an unpad leaves on a grid of ids (empty when no row or column survives).
UnpadBox box_by_tensor(const AnyresGeometry& g, bool use_round = true) {
  const int64_t h = g.rows * kP, w = g.cols * kP;
  const torch::Tensor ids = torch::arange(h * w, torch::kLong).view({1, h, w});
  const torch::Tensor u = hf_unpad(ids, g.original.height, g.original.width, use_round);
  if (u.numel() == 0) return UnpadBox{0, 0, 0, 0};
  const int64_t first = u[0][0][0].item<int64_t>();
  return UnpadBox{first / w, first / w + u.size(1), first % w, first % w + u.size(2)};
}

bool same_box(const UnpadBox& a, const UnpadBox& b) {
  const bool a_empty = a.bottom == a.top || a.right == a.left, b_empty = b.bottom == b.top || b.right == b.left;
  if (a_empty || b_empty) return a_empty == b_empty;
  return a.top == b.top && a.bottom == b.bottom && a.left == b.left && a.right == b.right;
}

std::string box_str(const UnpadBox& b) {
  return "rows [" + std::to_string(b.top) + ", " + std::to_string(b.bottom) + ") cols [" + std::to_string(b.left) + ", " +
         std::to_string(b.right) + ")";
}

// HF's packing of per-crop features [(1 + R*C) * p*p, D]: base, then the tiles viewed as a grid,
// permuted to [D, R*p, C*p], unpadded, a newline column appended, flattened row-major.
torch::Tensor hf_pack(const torch::Tensor& feats, const AnyresGeometry& g, const torch::Tensor& newline) {
  const int64_t d = feats.size(1);
  const torch::Tensor crops = feats.view({1 + g.rows * g.cols, kP * kP, d});
  const torch::Tensor base = crops[0];
  torch::Tensor grid = crops.slice(0, 1).reshape({g.rows, g.cols, kP, kP, d}).permute({4, 0, 2, 1, 3}).contiguous();
  grid = grid.view({d, g.rows * kP, g.cols * kP});
  grid = hf_unpad(grid, g.original.height, g.original.width);
  const torch::Tensor nl = newline.to(grid.dtype()).view({d, 1, 1}).expand({d, grid.size(1), 1});
  grid = torch::cat({grid, nl}, 2);
  grid = grid.flatten(1, 2).transpose(0, 1);
  return torch::cat({base, grid}, 0);
}

// The joint index of every packed position under HF's packing (-1 for newlines).
std::vector<int64_t> hf_pack_ids(const AnyresGeometry& g) {
  const int64_t n = (1 + g.rows * g.cols) * kP * kP;
  const torch::Tensor ids = torch::arange(n, torch::kDouble).unsqueeze(1);
  const torch::Tensor packed = hf_pack(ids, g, torch::full({1}, -1.0, torch::kDouble)).reshape({-1});
  std::vector<int64_t> out;
  for (int64_t i = 0; i < packed.size(0); ++i) out.push_back(static_cast<int64_t>(packed[i].item<double>()));
  return out;
}

ReducedTokens identity(int64_t n, int64_t d, torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  ReductionInput in;
  in.embeddings = torch::randn({n, d}).to(dtype);
  ReducedTokens r = FullReducer().reduce(in);
  r.entropy.assign(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i) r.entropy[i] = 0.001f * static_cast<float>(i);
  return r;
}

void expect_packing_invalid(const std::function<void()>& f, const std::string& needle) {
  test::expect_invalid_argument(f, needle);
}

// Sizes (HxW) where unpad is awkward: int() and round() disagree, odd remainders, extreme aspect.
const std::vector<std::pair<int64_t, int64_t>> kAwkward = {
    {55, 176},    {88, 99},    {205, 656},  {300, 400},  {480, 640},  {640, 480}, {899, 1024}, {427, 640},
    {1080, 1920}, {300, 1200}, {1000, 333}, {333, 1000}, {336, 336},  {250, 200}, {20, 900},   {900, 20},
    {8, 2000},    {1013, 337}, {7, 5},      {1, 1},      {673, 1345}, {97, 1001}, {1001, 97}};

TEST(AnyresPackingTest, UnpadBoxMatchesHfUnpadOnTensors) {
  for (const auto& [h, w] : kAwkward) {
    const AnyresGeometry g = geometry_for(h, w);
    const UnpadBox got = unpad_box(g), want = box_by_tensor(g);
    EXPECT_TRUE(same_box(got, want)) << name_of(g) << ": " << box_str(got) << " vs HF " << box_str(want);
  }
  // The three sizes llava.md names: plain int() gives a different box, so the test would catch
  // the original LLaVA's rule. (HF keeps 16 rows of 55x176, int() 14.)
  for (const auto& [h, w] : std::vector<std::pair<int64_t, int64_t>>{{55, 176}, {88, 99}, {205, 656}}) {
    const AnyresGeometry g = geometry_for(h, w);
    EXPECT_FALSE(same_box(box_by_tensor(g, /*use_round=*/false), unpad_box(g))) << name_of(g);
  }
  const UnpadBox b = unpad_box(geometry_for(55, 176));
  EXPECT_EQ(b.bottom - b.top, 16);
  EXPECT_EQ(b.right - b.left, 48);
}

TEST(AnyresPackingTest, UnpadBoxSweep) {
  // Every size in a sweep against the scalar HF formula; count int()/round() disagreements.
  int64_t checked = 0, disagree = 0, odd = 0;
  for (int64_t h = 1; h <= 1100; h += 3) {
    for (int64_t w = 1; w <= 1100; w += 2) {
      const AnyresGeometry g = geometry_for(h, w);
      const int64_t gh = g.rows * kP, gw = g.cols * kP;
      UnpadBox want{0, gh, 0, gw}, trunc{0, gh, 0, gw};
      if (static_cast<double>(w) / h > static_cast<double>(gw) / gh) {
        const double x = h * (static_cast<double>(gw) / w);
        const int64_t p = (gh - static_cast<int64_t>(std::round(x * 1e7) / 1e7)) / 2, q = (gh - static_cast<int64_t>(x)) / 2;
        want.top = p, want.bottom = gh - p, trunc.top = q, trunc.bottom = gh - q;
        odd += (gh - static_cast<int64_t>(std::round(x * 1e7) / 1e7)) % 2;
      } else {
        const double x = w * (static_cast<double>(gh) / h);
        const int64_t p = (gw - static_cast<int64_t>(std::round(x * 1e7) / 1e7)) / 2, q = (gw - static_cast<int64_t>(x)) / 2;
        want.left = p, want.right = gw - p, trunc.left = q, trunc.right = gw - q;
        odd += (gw - static_cast<int64_t>(std::round(x * 1e7) / 1e7)) % 2;
      }
      const UnpadBox got = unpad_box(g);
      ASSERT_TRUE(got.top == want.top && got.bottom == want.bottom && got.left == want.left && got.right == want.right)
          << name_of(g) << ": " << box_str(got) << " vs " << box_str(want);
      disagree += !(trunc.top == want.top && trunc.left == want.left);
      ++checked;
    }
  }
  std::cout << "[ unpad    ] " << checked << " sizes; int() would differ on " << disagree << ", odd remainder on " << odd << "\n";
  EXPECT_GT(disagree, 0);
  EXPECT_GT(odd, 0);
}

TEST(AnyresPackingTest, TokenCountTable) {
  struct Case {
    int64_t h, w, tokens;
  };
  // llava.md A.6 (HxW), plus the sizes where int() and round() disagree.
  for (const Case& c : std::vector<Case>{{336, 336, 1176},
                                         {480, 640, 2340},
                                         {899, 1024, 2634},
                                         {672, 672, 2928},
                                         {700, 700, 2928},
                                         {2000, 2000, 2928},
                                         {300, 400, 1368},
                                         {427, 640, 2144},
                                         {1080, 1920, 1948},
                                         {300, 1200, 1890},
                                         {55, 176, 1360},
                                         {88, 99, 1272},
                                         {205, 656, 1360}}) {
    const AnyresGeometry g = geometry_for(c.h, c.w);
    EXPECT_EQ(anyres_token_count(g), c.tokens) << name_of(g);
  }
  // 2928 is the maximum over all sizes.
  int64_t most = 0;
  for (int64_t h = 1; h <= 2100; h += 7)
    for (int64_t w = 1; w <= 2100; w += 5) most = std::max(most, anyres_token_count(geometry_for(h, w)));
  EXPECT_EQ(most, 2928);
}

TEST(AnyresPackingTest, IdentityMatchesHfPacking) {
  const int64_t d = 6;
  for (const auto& [h, w] : kAwkward) {
    const AnyresGeometry g = geometry_for(h, w);
    SCOPED_TRACE(name_of(g));
    const int64_t n = (1 + g.rows * g.cols) * kP * kP;
    for (const torch::Dtype dtype : {torch::kFloat, torch::kHalf}) {
      const ReducedTokens joint = identity(n, d, dtype, static_cast<uint64_t>(h * 7919 + w));
      const torch::Tensor newline = torch::randn({d});  // float32: cast to the embeddings' dtype
      const ReducedTokens out = pack_anyres(joint, g, newline);
      const torch::Tensor want = hf_pack(joint.embeddings, g, newline);
      ASSERT_EQ(out.embeddings.sizes(), want.sizes());
      EXPECT_EQ(out.embeddings.scalar_type(), dtype);
      EXPECT_TRUE(torch::equal(out.embeddings, want));
      EXPECT_EQ(out.embeddings.size(0), anyres_token_count(g));
      EXPECT_EQ(out.kept, hf_pack_ids(g));
      ASSERT_EQ(out.log_bias.numel(), want.size(0));
      EXPECT_EQ(out.log_bias.abs().sum().item<float>(), 0.f);
      EXPECT_EQ(out.entropy, joint.entropy);
      // Every token points at its own slot, or -1 outside the box.
      ASSERT_EQ(static_cast<int64_t>(out.assignment.size()), n);
      std::vector<int64_t> slot_of(static_cast<size_t>(n), -1);
      for (size_t s = 0; s < out.kept.size(); ++s)
        if (out.kept[s] >= 0) slot_of[out.kept[s]] = static_cast<int64_t>(s);
      EXPECT_EQ(out.assignment, slot_of);
    }
  }
}

// A random per-crop reduction: K tokens kept per crop; every other token joins a random kept
// token's cluster or (1 in 4) is dropped. Random embeddings, biases and entropies.
ReducedTokens random_crop_reduction(int64_t n, int64_t k, int64_t d, std::mt19937& rng) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), int64_t{0});
  std::shuffle(all.begin(), all.end(), rng);
  ReducedTokens r;
  r.kept.assign(all.begin(), all.begin() + k);
  std::sort(r.kept.begin(), r.kept.end());
  r.assignment.assign(static_cast<size_t>(n), -1);
  std::uniform_int_distribution<int64_t> pick(0, k - 1);
  std::uniform_int_distribution<int> quarter(0, 3);
  for (int64_t i = 0; i < n; ++i) r.assignment[i] = quarter(rng) == 0 ? -1 : pick(rng);
  for (int64_t s = 0; s < k; ++s) r.assignment[r.kept[s]] = s;
  r.embeddings = torch::randn({k, d});
  r.log_bias = torch::rand({k}) + 0.5;
  std::uniform_real_distribution<float> u(0.f, 3.f);
  for (int64_t i = 0; i < n; ++i) r.entropy.push_back(u(rng));
  return r;
}

TEST(AnyresPackingTest, ConcatCropsOffsetsEverything) {
  std::mt19937 rng(7);
  const int64_t n = kP * kP, d = 5;
  std::vector<ReducedTokens> crops = {random_crop_reduction(n, 10, d, rng), random_crop_reduction(n, 3, d, rng),
                                      random_crop_reduction(n, 7, d, rng)};
  const ReducedTokens j = concat_crops(crops, n);
  ASSERT_EQ(j.kept.size(), 20u);
  ASSERT_EQ(j.assignment.size(), static_cast<size_t>(3 * n));
  EXPECT_TRUE(std::is_sorted(j.kept.begin(), j.kept.end()));
  int64_t slot = 0;
  for (size_t c = 0; c < crops.size(); ++c) {
    const int64_t first_slot = slot;
    for (size_t s = 0; s < crops[c].kept.size(); ++s, ++slot) {
      EXPECT_EQ(j.kept[slot], static_cast<int64_t>(c) * n + crops[c].kept[s]);
      EXPECT_TRUE(torch::equal(j.embeddings[slot], crops[c].embeddings[s]));
      EXPECT_EQ(j.log_bias[slot].item<float>(), crops[c].log_bias[s].item<float>());
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = crops[c].assignment[i];
      EXPECT_EQ(j.assignment[c * n + i], a < 0 ? -1 : a + first_slot);
      EXPECT_EQ(j.entropy[c * n + i], crops[c].entropy[i]);
    }
  }
  // Per-crop identity reductions join into the identity.
  std::vector<ReducedTokens> full;
  for (int c = 0; c < 3; ++c) full.push_back(identity(n, d, torch::kFloat, 100 + c));
  const ReducedTokens fj = concat_crops(full, n);
  std::vector<int64_t> ids(static_cast<size_t>(3 * n));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  EXPECT_EQ(fj.kept, ids);
  EXPECT_EQ(fj.assignment, ids);

  expect_packing_invalid([] { concat_crops({}, 576); }, "no crops");
  expect_packing_invalid([&] { concat_crops(crops, n - 1); }, "assignments");
  crops[1].entropy.clear();
  expect_packing_invalid([&] { concat_crops(crops, n); }, "entropy");
}

TEST(AnyresPackingTest, ReducedPackingKeepsBoxTokensAndNewlines) {
  std::mt19937 rng(1234);
  const int64_t d = 4;
  int64_t clusters_dropped_total = 0;
  for (const auto& [h, w] : kAwkward) {
    const AnyresGeometry g = geometry_for(h, w);
    SCOPED_TRACE(name_of(g));
    const int64_t per_crop = kP * kP, crops = 1 + g.rows * g.cols, n = crops * per_crop;
    std::vector<ReducedTokens> per;
    for (int64_t c = 0; c < crops; ++c) per.push_back(random_crop_reduction(per_crop, 32 + 5 * c, d, rng));
    // Force an anchor into the grid's top-left corner (tile 0, patch 0), with members: it lies
    // outside the box whenever rows or columns are trimmed at the top or left.
    {
      ReducedTokens& t0 = per[1];
      if (t0.kept.front() != 0) {
        t0.kept.front() = 0;
        for (auto& a : t0.assignment)
          if (a == 0) a = -1;
        t0.assignment[0] = 0;
      }
      for (int64_t i = 1; i < 40; i += 3) t0.assignment[i] = 0;
      for (int64_t s = 0; s < static_cast<int64_t>(t0.kept.size()); ++s) t0.assignment[t0.kept[s]] = s;
    }
    const ReducedTokens joint = concat_crops(per, per_crop);
    const torch::Tensor newline = torch::randn({d});
    const ReducedTokens out = pack_anyres(joint, g, newline);

    // Expected order: HF's packing order restricted to kept tokens, newlines always.
    const std::set<int64_t> kept_set(joint.kept.begin(), joint.kept.end());
    std::vector<int64_t> want_order;
    for (int64_t id : hf_pack_ids(g))
      if (id < 0 || kept_set.count(id)) want_order.push_back(id);
    EXPECT_EQ(out.kept, want_order);

    const UnpadBox box = unpad_box(g);
    const int64_t newlines = std::count(out.kept.begin(), out.kept.end(), int64_t{-1});
    EXPECT_EQ(newlines, box.bottom - box.top);
    std::map<int64_t, int64_t> joint_slot;  // joint index -> joint slot
    for (size_t s = 0; s < joint.kept.size(); ++s) joint_slot[joint.kept[s]] = static_cast<int64_t>(s);
    int64_t in_box = 0;
    for (int64_t id : joint.kept) {
      if (id < per_crop) continue;
      const int64_t t = id / per_crop - 1, l = id % per_crop;
      const int64_t r = (t / g.cols) * kP + l / kP, c = (t % g.cols) * kP + l % kP;
      in_box += r >= box.top && r < box.bottom && c >= box.left && c < box.right;
    }
    EXPECT_EQ(static_cast<int64_t>(out.kept.size()), static_cast<int64_t>(per[0].kept.size()) + in_box + newlines);

    // Rows, biases: gathered from the joint slots; newline rows are image_newline with bias 0.
    ASSERT_EQ(out.embeddings.size(0), static_cast<int64_t>(out.kept.size()));
    ASSERT_EQ(out.log_bias.numel(), static_cast<int64_t>(out.kept.size()));
    for (size_t s = 0; s < out.kept.size(); ++s) {
      if (out.kept[s] < 0) {
        EXPECT_TRUE(torch::equal(out.embeddings[s], newline));
        EXPECT_EQ(out.log_bias[s].item<float>(), 0.f);
      } else {
        const int64_t js = joint_slot.at(out.kept[s]);
        EXPECT_TRUE(torch::equal(out.embeddings[s], joint.embeddings[js]));
        EXPECT_EQ(out.log_bias[s].item<float>(), joint.log_bias[js].item<float>());
        EXPECT_GT(out.log_bias[s].item<float>(), 0.f);
      }
    }
    EXPECT_EQ(out.entropy, joint.entropy);

    // Assignments: same cluster as before, on the anchor's new slot; -1 when the anchor went.
    ASSERT_EQ(static_cast<int64_t>(out.assignment.size()), n);
    std::set<int64_t> out_kept(out.kept.begin(), out.kept.end());
    std::set<int64_t> dropped_anchors;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t before = joint.assignment[i], after = out.assignment[i];
      if (before < 0) {
        EXPECT_EQ(after, -1) << "token " << i;
        continue;
      }
      const int64_t anchor = joint.kept[before];
      if (out_kept.count(anchor)) {
        ASSERT_GE(after, 0) << "token " << i;
        EXPECT_EQ(out.kept[after], anchor) << "token " << i;
      } else {
        EXPECT_EQ(after, -1) << "token " << i;
        dropped_anchors.insert(anchor);
      }
    }
    // The forced corner anchor: dropped with all its members exactly when it is outside the box.
    const int64_t corner = per_crop;  // tile 0, patch 0: grid (0, 0)
    const bool corner_inside = box.top == 0 && box.left == 0 && box.bottom > 0 && box.right > 0;
    EXPECT_EQ(out_kept.count(corner) == 1, corner_inside);
    EXPECT_EQ(dropped_anchors.count(corner) == 1, !corner_inside);
    int64_t corner_members = 0;
    for (int64_t i = 1; i < 40; i += 3) {
      const int64_t a = joint.assignment[per_crop + i];
      if (a < 0 || joint.kept[a] != corner) continue;  // became an anchor itself
      ++corner_members;
      if (!corner_inside) {
        EXPECT_EQ(out.assignment[per_crop + i], -1) << "member " << i;
      }
    }
    EXPECT_GT(corner_members, 5);
    clusters_dropped_total += static_cast<int64_t>(dropped_anchors.size());
  }
  EXPECT_GT(clusters_dropped_total, 0);
}

TEST(AnyresPackingTest, RefusesMismatchedInputs) {
  const AnyresGeometry g = geometry_for(480, 640);
  const int64_t n = 5 * kP * kP;
  const ReducedTokens joint = identity(n, 3, torch::kFloat, 1);
  expect_packing_invalid([&] { pack_anyres(joint, geometry_for(336, 336), torch::zeros({3})); }, "assignments");
  expect_packing_invalid([&] { pack_anyres(joint, g, torch::zeros({4})); }, "image_newline");
  ReducedTokens twice = joint;
  twice.kept[600] = 601;
  expect_packing_invalid([&] { pack_anyres(twice, g, torch::zeros({3})); }, "twice");
  AnyresGeometry bad = g;
  bad.rows = 0;
  expect_packing_invalid([&] { unpad_box(bad); }, "geometry");
}

}  // namespace
}  // namespace era

namespace era {
namespace {

// VisionZip's layout: the tiles' off-grid tokens (CLS, contextual) follow the grid, whatever the
// unpad box; base tokens stay first in their own order; grid tokens are packed as usual.
TEST(AnyresPackingTest, OffGridTokensFollowTheGrid) {
  const AnyresGeometry g = geometry_for(300, 800);  // 1 x 3 tiles, columns trimmed by unpad
  const int64_t per_crop = kP * kP, crops = 1 + g.rows * g.cols, d = 3;
  const UnpadBox box = unpad_box(g);
  ASSERT_GT(box.top + (g.rows * kP - box.bottom) + box.left + (g.cols * kP - box.right), 0) << "want a trimmed grid";
  // Per crop: [off-grid anchored at patch 0 (trimmed away on the tiles when top > 0 or left > 0),
  // one grid token at the crop's centre, off-grid anchored at the centre].
  std::vector<ReducedTokens> per;
  for (int64_t c = 0; c < crops; ++c) {
    ReducedTokens r;
    r.kept = {0, 300, 300};
    r.off_grid = {true, false, true};
    r.assignment.assign(static_cast<size_t>(per_crop), -1);
    r.assignment[300] = 1;
    r.embeddings = torch::full({3, d}, static_cast<float>(c)) + torch::arange(3).unsqueeze(1).to(torch::kFloat) * 0.1;
    r.log_bias = torch::zeros({3});
    per.push_back(r);
  }
  const ReducedTokens joint = concat_crops(per, per_crop);
  ASSERT_EQ(joint.off_grid.size(), static_cast<size_t>(3 * crops));
  const torch::Tensor newline = torch::full({d}, -1.0f);
  const ReducedTokens packed = pack_anyres(joint, g, newline);
  const int64_t rows = box.bottom - box.top;
  int64_t grid_tokens = 0;  // tile centres inside the box
  for (int64_t t = 0; t < g.rows * g.cols; ++t) {
    const int64_t r = (t / g.cols) * kP + 300 / kP, c = (t % g.cols) * kP + 300 % kP;
    grid_tokens += r >= box.top && r < box.bottom && c >= box.left && c < box.right;
  }
  ASSERT_EQ(static_cast<int64_t>(packed.kept.size()), 3 + grid_tokens + rows + 2 * (crops - 1));
  // base first, unchanged
  EXPECT_EQ(std::vector<int64_t>(packed.kept.begin(), packed.kept.begin() + 3), std::vector<int64_t>({0, 300, 300}));
  EXPECT_TRUE(packed.off_grid[0]);
  // the tail: every tile's two off-grid tokens, in slot (crop) order, never trimmed
  const int64_t tail = 3 + grid_tokens + rows;
  for (int64_t t = 0; t < crops - 1; ++t) {
    EXPECT_EQ(packed.kept[tail + 2 * t], (t + 1) * per_crop + 0);
    EXPECT_EQ(packed.kept[tail + 2 * t + 1], (t + 1) * per_crop + 300);
    EXPECT_TRUE(packed.off_grid[tail + 2 * t]);
    EXPECT_NEAR(packed.embeddings[tail + 2 * t][0].item<float>(), static_cast<float>(t + 1), 1e-6);
    EXPECT_NEAR(packed.embeddings[tail + 2 * t + 1][0].item<float>(), static_cast<float>(t + 1) + 0.2f, 1e-6);
  }
  // the last grid-part token is a newline
  EXPECT_EQ(packed.kept[tail - 1], -1);
}

}  // namespace
}  // namespace era
