// DivPrune: the greedy max-min selection equals an independent plain-loop reference, its first
// pick follows the official s0 rule, and on well-separated clusters it finds the max-min optimum
// that an exhaustive search over all subsets finds.
#include "reduce/divprune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reduce/reduce_test_util.h"
#include "reduce/registry.h"

namespace era {
namespace {

using Matrix = std::vector<std::vector<double>>;

// 1 - cos, in double, from plain loops.
Matrix cosine_distances(const torch::Tensor& x) {
  const auto c = x.to(torch::kDouble).contiguous();
  const int64_t n = c.size(0), d = c.size(1);
  const double* p = c.data_ptr<double>();
  Matrix dist(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n)));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0, ni = 0, nj = 0;
      for (int64_t t = 0; t < d; ++t) {
        dot += p[i * d + t] * p[j * d + t];
        ni += p[i * d + t] * p[i * d + t];
        nj += p[j * d + t] * p[j * d + t];
      }
      dist[i][j] = 1.0 - dot / std::sqrt(ni * nj);
    }
  }
  return dist;
}

int64_t reference_s0(const Matrix& dist) {
  int64_t best = 0;
  double best_value = -1e300;
  for (size_t j = 0; j < dist.size(); ++j) {
    std::vector<double> column;
    for (size_t i = 0; i < dist.size(); ++i) column.push_back(dist[i][j]);
    std::sort(column.begin(), column.end());
    if (column[1] > best_value) {
      best_value = column[1];
      best = static_cast<int64_t>(j);
    }
  }
  return best;
}

std::vector<int64_t> reference_greedy(const Matrix& dist, int64_t k) {
  const auto n = static_cast<int64_t>(dist.size());
  std::vector<int64_t> picked = {reference_s0(dist)};
  while (static_cast<int64_t>(picked.size()) < k) {
    int64_t best = -1;
    double best_value = -1e300;
    for (int64_t j = 0; j < n; ++j) {
      if (std::find(picked.begin(), picked.end(), j) != picked.end()) continue;
      double closest = 1e300;
      for (int64_t i : picked) closest = std::min(closest, dist[i][j]);
      if (closest > best_value) {
        best_value = closest;
        best = j;
      }
    }
    picked.push_back(best);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

double min_pairwise(const Matrix& dist, const std::vector<int64_t>& s) {
  double m = 1e300;
  for (size_t a = 0; a < s.size(); ++a)
    for (size_t b = a + 1; b < s.size(); ++b) m = std::min(m, dist[s[a]][s[b]]);
  return m;
}

TEST(DivPrune, MatchesPlainLoopReferenceOnRandomTokens) {
  for (uint64_t seed = 0; seed < 6; ++seed) {
    torch::manual_seed(seed);
    const torch::Tensor x = torch::randn({40, 16});
    const Matrix dist = cosine_distances(x);
    for (int64_t k : {1, 5, 12, 39}) {
      EXPECT_EQ(divprune_select(x, k), reference_greedy(dist, k)) << "seed " << seed << " k " << k;
    }
  }
}

TEST(DivPrune, FirstPickIsTheTokenWithTheFarthestNearestNeighbour) {
  // Five tight pairs and one loner at a right angle to all of them: the loner's nearest
  // neighbour is farthest, so a budget of 1 keeps exactly it.
  torch::manual_seed(3);
  torch::Tensor x = torch::zeros({11, 8});
  for (int64_t p = 0; p < 5; ++p) {
    x[2 * p][p % 4] = 1.0;
    x[2 * p][4] = 0.3 * static_cast<double>(p);
    x[2 * p + 1] = x[2 * p] + 0.01 * torch::randn({8});
  }
  x[10][7] = 1.0;
  EXPECT_EQ(divprune_select(x, 1), std::vector<int64_t>({10}));
  EXPECT_EQ(divprune_select(x, 1), std::vector<int64_t>({reference_s0(cosine_distances(x))}));
}

TEST(DivPrune, FindsTheExhaustiveMaxMinOptimumOnSeparatedClusters) {
  // 4 clusters of 3 near-identical tokens along orthogonal directions: the best 4-subset takes one
  // token per cluster (distance ~1 between any two); any other subset has a pair at ~0.
  torch::manual_seed(5);
  const int64_t clusters = 4, per = 3, n = clusters * per;
  torch::Tensor x = torch::zeros({n, 6});
  for (int64_t i = 0; i < n; ++i) {
    x[i][i / per] = 1.0;
    x[i] += 0.02 * torch::randn({6});
  }
  const Matrix dist = cosine_distances(x);
  double best = -1e300;
  for (int mask = 0; mask < (1 << n); ++mask) {  // every subset of size 4
    if (__builtin_popcount(static_cast<unsigned>(mask)) != clusters) continue;
    std::vector<int64_t> s;
    for (int64_t i = 0; i < n; ++i)
      if (mask & (1 << i)) s.push_back(i);
    best = std::max(best, min_pairwise(dist, s));
  }
  const auto picked = divprune_select(x, clusters);
  EXPECT_NEAR(min_pairwise(dist, picked), best, 0.1);
  std::vector<int64_t> cluster_of;
  for (int64_t i : picked) cluster_of.push_back(i / per);
  EXPECT_EQ(cluster_of, std::vector<int64_t>({0, 1, 2, 3}));
}

TEST(DivPrune, ReducerKeepsTheSelectedEmbeddingsInOrder) {
  ReductionRequest o;
  o.method = "divprune";
  const auto reducer = make_reducer(o);
  EXPECT_EQ(reducer->name(), "divprune");
  const ReductionInput in = test::random_reduction_input(64, 12, 2, 10, 9);
  const ReducedTokens r = reducer->reduce(in);
  const auto want = divprune_select(in.embeddings, 10);
  EXPECT_EQ(r.kept, want);
  ASSERT_EQ(r.embeddings.size(0), 10);
  for (size_t s = 0; s < want.size(); ++s) {
    EXPECT_TRUE(torch::equal(r.embeddings[static_cast<int64_t>(s)], in.embeddings[want[s]]));
    EXPECT_EQ(r.assignment[static_cast<size_t>(want[s])], static_cast<int64_t>(s));
  }
  EXPECT_EQ(std::count(r.assignment.begin(), r.assignment.end(), -1), 54);
  EXPECT_EQ(divprune_select(in.embeddings, 0).size(), 64u);  // no budget: everything
}

}  // namespace
}  // namespace era
