// BTR: nearest-anchor matching (brute force, ties to the first anchor), clusters covering every
// token once, centroids as member means, and the bias bounds 1 <= b_k <= |C_k| (= |C_k| at lambda 1).
#include "reduce/btr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "reduce/dep.h"
#include "reduce/reduce_test_util.h"

namespace era {
namespace {

TEST(BtrMatch, EveryTokenGoesToItsMostSimilarAnchor) {
  torch::manual_seed(3);
  const int64_t n = 150, d = 20;
  const auto x = torch::randn({n, d});
  const std::vector<int64_t> anchors = {2, 9, 40, 41, 77, 100, 149};
  const auto assignment = match_to_anchors(l2_normalize_rows(x), anchors);
  ASSERT_EQ(assignment.size(), static_cast<size_t>(n));
  const auto xd = x.to(torch::kDouble);
  const auto xn = xd / xd.norm(2, {1}, true);
  const auto sims = torch::mm(xn, xn.index_select(0, torch::tensor(anchors)).t());
  for (int64_t i = 0; i < n; ++i) {
    const auto slot = std::find(anchors.begin(), anchors.end(), i);
    if (slot != anchors.end()) {
      EXPECT_EQ(assignment[i], slot - anchors.begin()) << "anchor " << i << " is its own cluster";
    } else {
      EXPECT_EQ(assignment[i], sims[i].argmax().item<int64_t>()) << "token " << i;
    }
  }
  const auto sizes = cluster_sizes(assignment, static_cast<int64_t>(anchors.size()));
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), n);
  for (const auto s : sizes) EXPECT_GE(s, 1);
}

TEST(BtrMatch, TiesGoToTheFirstAnchor) {
  // Anchors 1, 3, 5 point along e0, e1, e1 (slots 0, 1, 2); each token's expected slot is noted.
  auto x = torch::zeros({7, 3});
  x[1][0] = 1;                  // anchor, slot 0
  x[3][1] = 1;                  // anchor, slot 1
  x[5][1] = 1;                  // anchor, slot 2: same direction as slot 1
  x[0][0] = x[0][1] = 0.5f;     // equidistant from slots 0 and 1 (and 2): slot 0
  x[2][0] = 0.2f, x[2][1] = 1;  // closer to e1: slot 1, not the equal slot 2
  x[4][1] = 3;                  // on e1 exactly: slot 1
  x[6][2] = 1;                  // orthogonal to all: ties at 0, slot 0
  const auto assignment = match_to_anchors(l2_normalize_rows(x), {1, 3, 5});
  EXPECT_EQ(assignment, (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 0}));
}

TEST(BtrCentroid, MeanOfMembersInFloat32ThenCast) {
  torch::manual_seed(4);
  const auto e = torch::randn({9, 5}) * 10;
  const std::vector<int64_t> assignment = {0, 1, 0, 2, 2, 2, 1, 0, 0};
  const auto c = cluster_centroids(e, assignment, 3);
  ASSERT_EQ(c.sizes(), (torch::IntArrayRef{3, 5}));
  EXPECT_TRUE(torch::allclose(c[0], (e[0] + e[2] + e[7] + e[8]) / 4, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(c[1], (e[1] + e[6]) / 2, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(c[2], (e[3] + e[4] + e[5]) / 3, 1e-5, 1e-5));

  const auto half = e.to(torch::kBFloat16);
  const auto ch = cluster_centroids(half, assignment, 3);
  EXPECT_EQ(ch.scalar_type(), torch::kBFloat16);
  const auto want =
      ((half[3].to(torch::kFloat) + half[4].to(torch::kFloat) + half[5].to(torch::kFloat)) / 3).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(ch[2], want));
}

TEST(BtrBias, WeightsFollowTheSaliency) {
  // Anchors 0 and 3; tokens 1, 2 join slot 0, token 4 joins slot 1. e^ = 0 is fully salient (w = 1),
  // e^ = 1 is fully uncertain (w = lambda).
  const std::vector<int64_t> anchors = {0, 3}, assignment = {0, 0, 0, 1, 1};
  const auto eh = torch::tensor({0.9f, 0.0f, 1.0f, 0.2f, 0.5f});
  const auto b = cluster_bias(assignment, anchors, eh, 0.3f);
  EXPECT_NEAR(b[0], 1 + 1.0 + 0.3, 1e-6);  // the anchor's own entropy does not count
  EXPECT_NEAR(b[1], 1 + 0.3 + 0.7 * 0.5, 1e-6);
  const auto ones = cluster_bias(assignment, anchors, eh, 1.0f);
  EXPECT_EQ(ones, (std::vector<float>{3.0f, 2.0f}));  // lambda = 1: exactly |C_k| (ToMe's sizes)
  const auto zero = cluster_bias(assignment, anchors, eh, 0.0f);
  EXPECT_NEAR(zero[0], 2.0, 1e-6);
  EXPECT_NEAR(zero[1], 1.5, 1e-6);
  // Dropped tokens (-1) add nothing.
  EXPECT_EQ(cluster_bias({0, -1, -1, 1, -1}, anchors, eh, 0.3f), (std::vector<float>{1.0f, 1.0f}));
}

TEST(BtrBias, BoundedByOneAndTheClusterSize) {
  for (const float lambda : {0.0f, 0.3f, 0.7f, 1.0f}) {
    const auto in = test::random_reduction_input(200, 16, 16, 12, 21);
    const auto dep = dual_view_entropy_pruning(in.embeddings, in.cls_logits, EraOptions{}, 12);
    const auto assignment = match_to_anchors(l2_normalize_rows(in.embeddings), dep.anchors);
    const auto sizes = cluster_sizes(assignment, 12);
    const auto b = cluster_bias(assignment, dep.anchors, dep.saliency.normalized, lambda);
    for (size_t k = 0; k < b.size(); ++k) {
      EXPECT_GE(b[k], 1.0f);
      EXPECT_LE(b[k], static_cast<float>(sizes[k]) * (1 + 1e-6f));
      if (lambda == 1.0f) {
        EXPECT_EQ(b[k], static_cast<float>(sizes[k]));
      }
      if (lambda == 0.3f) {
        EXPECT_GE(b[k], 1 + 0.3f * (sizes[k] - 1) - 1e-4f);
      }
    }
  }
}

}  // namespace
}  // namespace era
