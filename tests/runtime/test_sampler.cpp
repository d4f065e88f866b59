#include <gtest/gtest.h>

#include <cmath>

#include "era/error.h"
#include "runtime/sampler.h"

namespace era {
namespace {

TEST(Sampler, GreedyTakesFirstIndexOnTies) {
  Sampler s({});
  EXPECT_EQ(s.next(torch::tensor({0.5f, 2.0f, 2.0f, 1.0f})), 1);
  EXPECT_EQ(s.next(torch::tensor({3.0f, 3.0f})), 0);
}

TEST(Sampler, SamplingFollowsTheDistribution) {
  Sampler s({/*temperature=*/1.0f, /*top_p=*/1.0f, /*seed=*/11});
  const auto logits = torch::tensor({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  std::vector<int> counts(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.next(logits)]++;
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  Sampler s({1.0f, 0.75f, 5});
  const auto logits = torch::tensor({std::log(0.2f), std::log(0.5f), std::log(0.3f)});
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 5000; ++i) counts[s.next(logits)]++;
  EXPECT_EQ(counts[0], 0);  // 0.5 + 0.3 reaches 0.75 without the 0.2 token
  EXPECT_GT(counts[1], counts[2]);
  EXPECT_GT(counts[2], 0);
}

TEST(Sampler, SameSeedSameTokens) {
  const auto logits = torch::randn({100});
  Sampler a({0.8f, 0.9f, 42}), b({0.8f, 0.9f, 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.next(logits), b.next(logits));
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(Sampler({-1.0f, 1.0f, 0}), Error);
  EXPECT_THROW(Sampler({1.0f, 0.0f, 0}), Error);
  EXPECT_THROW(Sampler({1.0f, 1.5f, 0}), Error);
}

}  // namespace
}  // namespace era
