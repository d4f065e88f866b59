// pool: the grid rule, bins equal to PyTorch's adaptive average pooling, anchors and assignment
// consistent with the bins.
#include "reduce/pooling.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "era/error.h"
#include "reduce/reduce_test_util.h"
#include "reduce/registry.h"

namespace era {
namespace {

TEST(Pooling, GridNeverExceedsTheBudget) {
  EXPECT_EQ(pool_grid(64, 24).rows, 8);
  EXPECT_EQ(pool_grid(64, 24).cols, 8);
  EXPECT_EQ(pool_grid(128, 24).rows * pool_grid(128, 24).cols, 121);
  EXPECT_EQ(pool_grid(192, 24).rows * pool_grid(192, 24).cols, 182);
  EXPECT_EQ(pool_grid(32, 24).rows * pool_grid(32, 24).cols, 30);
  EXPECT_EQ(pool_grid(0, 24).rows, 24);
  for (int64_t b = 1; b < 576; ++b) {
    const PoolGrid g = pool_grid(b, 24);
    EXPECT_LE(g.rows * g.cols, b) << b;
    EXPECT_GT((g.rows + 1) * (g.cols + 1), b) << b;  // nothing coarser than needed
  }
}

TEST(Pooling, EqualsAdaptiveAvgPool) {
  for (int64_t budget : {64, 121, 30, 200}) {
    const ReductionInput in = test::random_reduction_input(576, 10, 2, budget, 4);
    ReductionRequest o;
    o.method = "pool";
    const ReducedTokens r = make_reducer(o)->reduce(in);
    const PoolGrid g = pool_grid(budget, 24);
    const torch::Tensor img = in.embeddings.reshape({24, 24, 10}).permute({2, 0, 1}).unsqueeze(0);
    const torch::Tensor want = torch::adaptive_avg_pool2d(img, {g.rows, g.cols})[0].permute({1, 2, 0}).reshape({-1, 10});
    ASSERT_EQ(r.embeddings.sizes(), want.sizes()) << budget;
    EXPECT_LT((r.embeddings - want).abs().max().item<double>(), 1e-5) << budget;
    EXPECT_TRUE(std::is_sorted(r.kept.begin(), r.kept.end()));
    EXPECT_EQ(std::adjacent_find(r.kept.begin(), r.kept.end()), r.kept.end());
    for (int64_t i = 0; i < 576; ++i) {  // every patch lies in the bin it is assigned to
      const int64_t slot = r.assignment[static_cast<size_t>(i)];
      const int64_t br = slot / g.cols, bc = slot % g.cols, pr = i / 24, pc = i % 24;
      EXPECT_GE(pr, pool_bin_start(br, 24, g.rows));
      EXPECT_LT(pr, pool_bin_end(br, 24, g.rows));
      EXPECT_GE(pc, pool_bin_start(bc, 24, g.cols));
      EXPECT_LT(pc, pool_bin_end(bc, 24, g.cols));
    }
    for (size_t s = 0; s < r.kept.size(); ++s) {  // and each anchor in its own bin
      const int64_t a = r.kept[s], br = static_cast<int64_t>(s) / g.cols, bc = static_cast<int64_t>(s) % g.cols;
      EXPECT_GE(a / 24, pool_bin_start(br, 24, g.rows));
      EXPECT_LT(a / 24, pool_bin_end(br, 24, g.rows));
      EXPECT_GE(a % 24, pool_bin_start(bc, 24, g.cols));
      EXPECT_LT(a % 24, pool_bin_end(bc, 24, g.cols));
    }
  }
}

TEST(Pooling, RefusesANonSquareTokenCount) {
  ReductionRequest o;
  o.method = "pool";
  const ReductionInput in = test::random_reduction_input(50, 4, 2, 9, 1);
  EXPECT_THROW(make_reducer(o)->reduce(in), Error);
}

}  // namespace
}  // namespace era
