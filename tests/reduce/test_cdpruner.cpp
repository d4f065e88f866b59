// CDPruner (text-encoder-free variant): the fast greedy MAP equals the brute-force greedy that
// recomputes log det for every candidate, relevance and its min-max behave, and the reducer wires
// them together.
#include "reduce/cdpruner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "era/error.h"
#include "reduce/reduce_test_util.h"
#include "reduce/registry.h"

namespace era {
namespace {

// Greedy MAP the slow way: each step adds the candidate with the largest log det(L_{S+j}).
std::vector<int64_t> brute_force_greedy(const torch::Tensor& L, int64_t k) {
  const torch::Tensor l = L.to(torch::kDouble);
  std::vector<int64_t> picked;
  for (int64_t step = 0; step < k; ++step) {
    int64_t best = -1;
    double best_value = -1e300;
    for (int64_t j = 0; j < l.size(0); ++j) {
      if (std::find(picked.begin(), picked.end(), j) != picked.end()) continue;
      std::vector<int64_t> s = picked;
      s.push_back(j);
      const auto idx = torch::tensor(s, torch::kLong);
      const double v = torch::logdet(l.index_select(0, idx).index_select(1, idx)).item<double>();
      if (v > best_value) {
        best_value = v;
        best = j;
      }
    }
    picked.push_back(best);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

TEST(CdPruner, FastGreedyMapEqualsBruteForceGreedy) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    torch::manual_seed(seed);
    const torch::Tensor b = torch::randn({14, 20});
    const torch::Tensor L = torch::matmul(b, b.t());  // PSD, full rank
    for (int64_t k : {1, 4, 9, 13}) EXPECT_EQ(dpp_greedy_map(L, k), brute_force_greedy(L, k)) << seed << " " << k;
  }
  // The same on a CDPruner kernel (rank up to D = 6 < N: only up to 6 picks are well defined).
  torch::manual_seed(11);
  const torch::Tensor p = torch::randn({12, 6});
  const torch::Tensor r = torch::rand({12}) + 0.1;
  EXPECT_EQ(dpp_greedy_map(cdpruner_kernel(p, r), 5), brute_force_greedy(cdpruner_kernel(p, r), 5));
}

TEST(CdPruner, RankDeficientKernelStillGivesDistinctPicks) {
  torch::manual_seed(8);
  const torch::Tensor p = torch::randn({12, 3});  // rank 3, budget 8
  const auto picked = dpp_greedy_map(cdpruner_kernel(p, torch::ones({12})), 8);
  ASSERT_EQ(picked.size(), 8u);
  EXPECT_EQ(std::adjacent_find(picked.begin(), picked.end()), picked.end());
  // The first three (well-defined) picks are the brute-force ones.
  const auto first = dpp_greedy_map(cdpruner_kernel(p, torch::ones({12})), 3);
  EXPECT_EQ(first, brute_force_greedy(cdpruner_kernel(p, torch::ones({12})), 3));
}

TEST(CdPruner, ManyEqualTokensGiveDistinctPicksPastTheRank) {
  // A bfloat16 projector can map many patches to the same token: 391 tokens, 3 distinct, budget 98
  // (Qwen2.5-VL's sample-image count). Dividing by the noise-level gains once made argmax repeat
  // picks (NaN gains); past the rank the picks must still be distinct, and the first three are
  // one token of each of the distinct rows.
  torch::manual_seed(5);
  const torch::Tensor rows = torch::randn({3, 16});
  const torch::Tensor p = rows.index_select(0, torch::arange(391) % 3);
  const torch::Tensor r = cdpruner_normalise(torch::rand({391}), 0.0, 1.0);
  const auto picked = dpp_greedy_map(cdpruner_kernel(p, r), 98);
  ASSERT_EQ(picked.size(), 98u);
  EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
  EXPECT_EQ(std::adjacent_find(picked.begin(), picked.end()), picked.end());
  std::set<int64_t> first_kinds;
  for (int64_t j : dpp_greedy_map(cdpruner_kernel(p, r), 3)) first_kinds.insert(j % 3);
  EXPECT_EQ(first_kinds.size(), 3u);
}

TEST(CdPruner, RelevanceAndNormalisation) {
  torch::manual_seed(2);
  torch::Tensor p = torch::randn({8, 5});
  const torch::Tensor instruction = torch::randn({1, 5});
  p[3] = instruction[0] * 2.5;  // same direction as the instruction
  const torch::Tensor rel = cdpruner_relevance(p, instruction, false);
  EXPECT_NEAR(rel[3].item<double>(), 1.0, 1e-5);
  const torch::Tensor r = cdpruner_normalise(rel, rel.min().item<double>(), rel.max().item<double>());
  EXPECT_NEAR(r[3].item<double>(), 1.0, 1e-5);     // the most relevant token: r = 1
  EXPECT_NEAR(r.min().item<double>(), 0.0, 1e-5);  // the least: ~0 (1e-6 keeps it alive)
  EXPECT_GT(r.min().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(cdpruner_relevance(p, instruction, true), -rel));
  // Mean over instruction tokens.
  const torch::Tensor two = torch::randn({2, 5});
  const torch::Tensor both = cdpruner_relevance(p, two, false);
  const torch::Tensor each =
      (cdpruner_relevance(p, two.slice(0, 0, 1), false) + cdpruner_relevance(p, two.slice(0, 1, 2), false)) / 2;
  EXPECT_TRUE(torch::allclose(both, each, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(cdpruner_normalise(rel, 0.5, 0.5), torch::ones_like(rel)));
}

TEST(CdPruner, KernelIsRelevanceWeightedCosine) {
  torch::manual_seed(4);
  const torch::Tensor p = torch::randn({6, 3});
  const torch::Tensor r = torch::rand({6});
  const torch::Tensor L = cdpruner_kernel(p, r);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      const double cos = torch::cosine_similarity(p[i], p[j], 0).item<double>();
      EXPECT_NEAR(L[i][j].item<double>(), r[i].item<double>() * cos * r[j].item<double>(), 1e-5);
    }
}

TEST(CdPruner, ReducerPrefersRelevantTokensAndNeedsTheInstruction) {
  ReductionRequest o;
  o.method = "cdpruner";
  const auto reducer = make_reducer(o);
  ReductionInput in = test::random_reduction_input(64, 16, 2, 8, 6);
  EXPECT_THROW(reducer->reduce(in), Error);
  in.instruction_embeddings = torch::randn({3, 16});
  const ReducedTokens r = reducer->reduce(in);
  ASSERT_EQ(r.kept.size(), 8u);
  EXPECT_TRUE(std::is_sorted(r.kept.begin(), r.kept.end()));
  // Same as composing the pieces by hand.
  const torch::Tensor rel = cdpruner_relevance(in.embeddings, in.instruction_embeddings, false);
  const torch::Tensor w = cdpruner_normalise(rel, rel.min().item<double>(), rel.max().item<double>());
  EXPECT_EQ(r.kept, dpp_greedy_map(cdpruner_kernel(in.embeddings, w), 8));
  // A token aligned with the instruction is kept (it has the largest kernel diagonal: first pick).
  in.embeddings[40] = in.instruction_embeddings.mean(0) * 3;
  const ReducedTokens aligned = reducer->reduce(in);
  EXPECT_NE(std::find(aligned.kept.begin(), aligned.kept.end(), 40), aligned.kept.end());
  // The min-max range can come from the whole image.
  in.image_embeddings = torch::cat({in.embeddings, torch::randn({64, 16}) * 5}, 0);
  const ReducedTokens wide = reducer->reduce(in);
  const torch::Tensor all = cdpruner_relevance(in.image_embeddings, in.instruction_embeddings, false);
  const torch::Tensor rel2 = cdpruner_relevance(in.embeddings, in.instruction_embeddings, false);
  const torch::Tensor w2 = cdpruner_normalise(rel2, all.min().item<double>(), all.max().item<double>());
  EXPECT_EQ(wide.kept, dpp_greedy_map(cdpruner_kernel(in.embeddings, w2), 8));
}

}  // namespace
}  // namespace era
