// VisionZip: the budget split, the dominant set from the summed CLS attention, the contextual
// targets and their hard assignment by head-mean key cosine, and contextual = target + mean of
// its members, all on constructed inputs whose answer is known; projection after merging.
#include "reduce/visionzip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "era/error.h"
#include "reduce/reduce_test_util.h"
#include "reduce/registry.h"

namespace era {
namespace {

TEST(VisionZip, BudgetSplit) {
  const double f = BaselineOptions().visionzip_contextual_fraction;
  EXPECT_EQ(visionzip_split(64, f).dominant, 54);
  EXPECT_EQ(visionzip_split(64, f).contextual, 10);
  EXPECT_EQ(visionzip_split(128, f).dominant, 108);
  EXPECT_EQ(visionzip_split(128, f).contextual, 20);
  EXPECT_EQ(visionzip_split(192, f).dominant, 162);
  EXPECT_EQ(visionzip_split(192, f).contextual, 30);
  EXPECT_EQ(visionzip_split(32, f).dominant, 27);
  EXPECT_EQ(visionzip_split(1, f).dominant, 1);  // the CLS token alone
  EXPECT_EQ(visionzip_split(1, f).contextual, 0);
}

// 576 patches, C = 8 features; the 53 dominant patches are the multiples of 10 below 530 (large
// CLS attention, spread over two heads). Keys: the remaining patches point along one of 10
// orthogonal-ish directions chosen so the expected assignment is known.
struct Constructed {
  ReductionInput in;
  std::vector<int64_t> dominant, rest;
  std::vector<int64_t> key_group;  // per rest position: which target it must join
};

Constructed construct() {
  Constructed c;
  const int64_t n = 576, heads = 2, hd = 12;
  torch::manual_seed(1);
  c.in.embeddings = torch::zeros({n, 4});
  c.in.features = torch::randn({n, 8});
  torch::Tensor probs = torch::full({heads, n}, 0.1 / n);
  for (int64_t p = 0; p < 530; p += 10) {
    c.dominant.push_back(p);
    probs[p % 2][p] = 0.5 + 0.001 * static_cast<double>(p);  // in one head only: the head SUM decides
  }
  c.in.cls_probs = probs;
  c.in.cls_feature = torch::randn({8});
  for (int64_t p = 0; p < n; ++p)
    if (std::find(c.dominant.begin(), c.dominant.end(), p) == c.dominant.end()) c.rest.push_back(p);
  // M = 523 rest tokens, c = 10 targets at rest positions 0, 52, 104, ... (step 523 / 10 = 52).
  torch::Tensor keys = torch::randn({n + 1, hd}) * 0.01;
  const int64_t m = static_cast<int64_t>(c.rest.size());
  for (int64_t i = 0; i < m; ++i) {
    const int64_t group = (i % 52 == 0 && i / 52 < 10) ? i / 52 : (i * 7) % 10;  // targets own their group
    c.key_group.push_back(group);
    keys[c.rest[static_cast<size_t>(i)] + 1][group] += 1.0;  // row = patch + 1 (CLS first)
  }
  c.in.mean_keys = keys;
  c.in.project = [](const torch::Tensor& f) { return f.slice(1, 0, 4) * 2.0; };  // a known "projector"
  c.in.budget = 64;
  return c;
}

TEST(VisionZip, DominantAndContextualTokensOnAConstructedCrop) {
  Constructed c = construct();
  ReductionRequest o;
  o.method = "visionzip";
  const ReducedTokens r = make_reducer(o)->reduce(c.in);
  ASSERT_EQ(r.kept.size(), 64u);
  ASSERT_EQ(r.embeddings.size(0), 64);
  // [CLS, 53 dominant in raster order, 10 contextual]
  EXPECT_EQ(r.kept[0], 520);  // the CLS anchor: the patch with the largest summed attention
  EXPECT_EQ(std::vector<int64_t>(r.kept.begin() + 1, r.kept.begin() + 54), c.dominant);
  std::vector<int64_t> targets;
  for (int64_t j = 0; j < 10; ++j) targets.push_back(c.rest[static_cast<size_t>(j * 52)]);
  EXPECT_EQ(std::vector<int64_t>(r.kept.begin() + 54, r.kept.end()), targets);
  ASSERT_EQ(r.off_grid.size(), 64u);
  EXPECT_TRUE(r.off_grid[0]);
  EXPECT_FALSE(r.off_grid[1]);
  EXPECT_TRUE(r.off_grid[54]);

  // Values: CLS feature, dominant features, target + mean(assigned), through the projector.
  const torch::Tensor f = c.in.features;
  EXPECT_TRUE(torch::allclose(r.embeddings[0], c.in.cls_feature.slice(0, 0, 4) * 2.0));
  for (int64_t s = 1; s < 54; ++s) EXPECT_TRUE(torch::allclose(r.embeddings[s], f[r.kept[s]].slice(0, 0, 4) * 2.0));
  for (int64_t j = 0; j < 10; ++j) {
    torch::Tensor sum = torch::zeros({8});
    int64_t members = 0;
    for (size_t i = 0; i < c.rest.size(); ++i) {
      if (c.key_group[i] != j || static_cast<int64_t>(i) == j * 52) continue;
      sum += f[c.rest[i]];
      ++members;
      EXPECT_EQ(r.assignment[static_cast<size_t>(c.rest[i])], 54 + j);
    }
    ASSERT_GT(members, 0);
    const torch::Tensor want = (f[targets[static_cast<size_t>(j)]] + sum / members).slice(0, 0, 4) * 2.0;
    EXPECT_TRUE(torch::allclose(r.embeddings[54 + j], want, 1e-5, 1e-5)) << j;
    EXPECT_EQ(r.assignment[static_cast<size_t>(targets[static_cast<size_t>(j)])], 54 + j);
  }
  // Nothing is dropped: every patch is in a dominant or a contextual token.
  EXPECT_EQ(std::count(r.assignment.begin(), r.assignment.end(), -1), 0);
}

TEST(VisionZip, ContextualTokenWithoutMembersIsItsTarget) {
  Constructed c = construct();
  // Every non-target key points along group 0: targets 1..9 get no member.
  torch::Tensor keys = c.in.mean_keys.clone();
  for (size_t i = 0; i < c.rest.size(); ++i) {
    if (i % 52 == 0 && i / 52 < 10) continue;
    keys[c.rest[i] + 1] = torch::zeros({12});
    keys[c.rest[i] + 1][0] = 1.0;
  }
  c.in.mean_keys = keys;
  ReductionRequest o;
  o.method = "visionzip";
  const ReducedTokens r = make_reducer(o)->reduce(c.in);
  for (int64_t j = 1; j < 10; ++j) {
    EXPECT_TRUE(torch::allclose(r.embeddings[54 + j], c.in.features[r.kept[static_cast<size_t>(54 + j)]].slice(0, 0, 4) * 2.0));
  }
}

TEST(VisionZip, ContextualFractionOptionAndOldBundles) {
  Constructed c = construct();
  ReductionRequest o;
  o.method = "visionzip";
  set_baseline_option(o.baselines, "visionzip_contextual_fraction=0.25");
  EXPECT_EQ(make_reducer(o)->reduce(c.in).kept.size(), 64u);  // 48 + 16
  c.in.cls_feature = torch::Tensor();                         // a bundle exported before VisionZip support
  try {
    make_reducer(o)->reduce(c.in);
    FAIL() << "expected era::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("re-export"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era
