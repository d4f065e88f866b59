// random: a seeded, repeatable, uniform subset in raster order.
#include "reduce/random_pruning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "reduce/reduce_test_util.h"
#include "reduce/registry.h"

namespace era {
namespace {

TEST(RandomPruning, SeededDistinctAscending) {
  const auto a = random_select(576, 64, 7);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 64u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 576);
  EXPECT_EQ(a, random_select(576, 64, 7));
  EXPECT_NE(a, random_select(576, 64, 8));
  EXPECT_EQ(random_select(10, 0, 1).size(), 10u);
  EXPECT_EQ(random_select(10, 10, 1).size(), 10u);
}

TEST(RandomPruning, EveryTokenIsEquallyLikely) {
  // Over many seeds each of 12 tokens is kept about 3/12 of the time.
  std::vector<int> hits(12, 0);
  const int runs = 6000;
  for (int s = 0; s < runs; ++s)
    for (int64_t i : random_select(12, 3, static_cast<uint64_t>(s))) hits[static_cast<size_t>(i)]++;
  for (int h : hits) EXPECT_NEAR(h / static_cast<double>(runs), 0.25, 0.03);
}

TEST(RandomPruning, ReducerUsesTheSeedFromTheOptions) {
  ReductionRequest o;
  o.method = "random";
  o.baselines.random_seed = 42;
  const ReductionInput in = test::random_reduction_input(100, 8, 2, 20, 1);
  const ReducedTokens r = make_reducer(o)->reduce(in);
  EXPECT_EQ(r.kept, random_select(100, 20, 42));
  for (size_t s = 0; s < r.kept.size(); ++s)
    EXPECT_TRUE(torch::equal(r.embeddings[static_cast<int64_t>(s)], in.embeddings[r.kept[s]]));
}

}  // namespace
}  // namespace era
