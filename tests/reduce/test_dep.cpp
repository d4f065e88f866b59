// DEP: head entropies, the dual view, and the column-only greedy search against Algorithm 1 done
// the straightforward way (full similarity matrix, written here), including ties; with alpha = eta
// = 0 it is plain max-min diversity.
#include "reduce/dep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reduce/reduce_test_util.h"

namespace era {
namespace {

// Algorithm 1 as printed: C = Z Z^T first, start at argmin e, cache m = C[:, s0], then take
// argmax_{j not in S} (-m_j - eta*p_j) and m = max(m, C[:, j*]) until |S| = K. First index on ties.
std::vector<int64_t> reference_greedy(const torch::Tensor& z, const torch::Tensor& e, const torch::Tensor& p, float eta,
                                      int64_t k) {
  const int64_t n = z.size(0);
  const torch::Tensor c = torch::mm(z, z.t()).contiguous();
  const auto C = c.accessor<float, 2>();
  const auto ea = e.accessor<float, 1>();
  const auto pa = p.accessor<float, 1>();
  int64_t s0 = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ea[i] < ea[s0]) s0 = i;
  }
  std::vector<int64_t> S{s0};
  std::vector<float> m(n), eta_p(n);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = C[i][s0];
    eta_p[i] = eta * pa[i];
  }
  while (static_cast<int64_t>(S.size()) < k) {
    std::vector<float> score(n);
    for (int64_t j = 0; j < n; ++j) {
      const bool in_s = std::find(S.begin(), S.end(), j) != S.end();
      score[j] = in_s ? -std::numeric_limits<float>::infinity() : -m[j] - eta_p[j];
    }
    const int64_t best = std::max_element(score.begin(), score.end()) - score.begin();  // first maximum
    S.push_back(best);
    for (int64_t i = 0; i < n; ++i) m[i] = std::max(m[i], C[i][best]);
  }
  return S;
}

// DEP from x and A, every step written out here: softmax over heads, entropy, min-max, z.
struct ReferenceDep {
  torch::Tensor entropy, normalized, z;
  std::vector<int64_t> order;
};
ReferenceDep reference_dep(const torch::Tensor& x, const torch::Tensor& a, float alpha, float eta, float eps, int64_t k,
                           bool normalized_penalty = true) {
  ReferenceDep r;
  const auto at = a.t();
  const auto ex = torch::exp(at - std::get<0>(at.max(1, true)));
  const auto y = ex / ex.sum(1, true);
  r.entropy = -(y * torch::log(y + eps)).sum(1);
  r.normalized = (r.entropy - r.entropy.min()) / (r.entropy.max() - r.entropy.min() + eps);
  const auto xh = x / torch::sqrt((x * x).sum(1, true));
  const auto cat = torch::cat({xh, alpha * y}, 1);
  r.z = (cat / torch::sqrt((cat * cat).sum(1, true))).contiguous();
  r.order = reference_greedy(r.z, r.entropy, normalized_penalty ? r.normalized : r.entropy, eta, k);
  return r;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(DepEntropy, HeadDistributionAndBounds) {
  const int64_t h = 16;
  auto a = torch::randn({h, 50}) * 4;
  a.select(1, 0).fill_(0.0f);         // uniform over heads: entropy ln H, the maximum
  a.select(1, 1).zero_()[3] = 60.0f;  // one head dominates: entropy ~ 0
  const auto s = head_entropy(a, 1e-8f);
  ASSERT_EQ(s.y.sizes(), (torch::IntArrayRef{50, h}));
  EXPECT_TRUE(torch::allclose(s.y.sum(1), torch::ones({50}), 1e-5, 1e-6));
  const auto e = test::floats(s.entropy);
  for (const float v : e) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, std::log(16.0f) + 1e-5f);
  }
  EXPECT_NEAR(e[0], std::log(16.0f), 1e-5);
  EXPECT_NEAR(e[1], 0.0f, 1e-5);
  // e^ spans [0, 1]: 0 at the most confident token, ~1 at the most uncertain.
  const auto eh = test::floats(s.normalized);
  EXPECT_EQ(eh[1], 0.0f);
  EXPECT_NEAR(eh[0], 1.0f, 1e-6);
  EXPECT_GE(*std::min_element(eh.begin(), eh.end()), 0.0f);
  EXPECT_LE(*std::max_element(eh.begin(), eh.end()), 1.0f);
}

TEST(DepEntropy, AllEqualEntropiesNormaliseToZero) {
  const auto s = head_entropy(torch::zeros({4, 10}), 1e-8f);  // every token uniform
  for (const float v : test::floats(s.normalized)) EXPECT_EQ(v, 0.0f);
}

TEST(DepDualView, ViewsAndNormalisation) {
  const auto x = torch::randn({20, 64}) * 30;
  const auto y = torch::softmax(torch::randn({20, 8}), 1);
  const auto z = dual_view(x, y, 0.5f, true, true);
  ASSERT_EQ(z.sizes(), (torch::IntArrayRef{20, 72}));
  EXPECT_TRUE(torch::allclose(z.norm(2, {1}), torch::ones({20}), 1e-5, 1e-6));
  // x is normalised before the concatenation, so alpha really weighs the two views.
  const auto xn = x / x.norm(2, {1}, true);
  const auto scale = torch::sqrt(1 + 0.25 * (y * y).sum(1, true));
  EXPECT_TRUE(torch::allclose(z, torch::cat({xn, 0.5 * y}, 1) / scale, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(dual_view(x, y, 0.5f, true, false), xn, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(dual_view(x, y, 3.0f, false, true), y / y.norm(2, {1}, true), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(dual_view(x, y, 0.0f, true, true).slice(1, 0, 64), xn, 1e-5, 1e-6));
  EXPECT_THROW(dual_view(x, y, 0.5f, false, false), std::exception);
}

TEST(DepGreedy, MatchesFullMatrixAlgorithmOnRandomInputs) {
  struct Case {
    int64_t n, d, h, k;
    float eta, alpha;
  };
  const std::vector<Case> cases = {
      {16, 8, 4, 4, 0.1f, 0.5f},       {64, 32, 16, 8, 0.1f, 0.5f},  {64, 32, 16, 63, 0.1f, 0.5f},
      {100, 16, 8, 10, 0.0f, 0.5f},    {100, 16, 8, 10, 1.0f, 0.5f}, {100, 16, 8, 10, 5.0f, 2.0f},
      {200, 256, 16, 32, 0.1f, 0.0f},  {200, 64, 3, 50, 0.3f, 1.0f}, {576, 128, 16, 64, 0.1f, 0.5f},
      {576, 1024, 16, 32, 0.1f, 0.5f}, {50, 8, 1, 10, 0.1f, 0.5f},  // H = 1: every entropy is 0, all tie
      {30, 4, 2, 2, 0.1f, 0.5f},       {30, 4, 2, 1, 0.1f, 0.5f},
  };
  uint64_t seed = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "N=" << c.n << " D=" << c.d << " H=" << c.h << " K=" << c.k << " eta=" << c.eta
                                    << " alpha=" << c.alpha);
    const auto in = test::random_reduction_input(c.n, c.d, c.h, c.k, seed++);
    EraOptions o;
    o.alpha = c.alpha;
    o.eta = c.eta;
    const auto ref = reference_dep(in.embeddings, in.cls_logits, c.alpha, c.eta, o.epsilon, c.k);
    const auto dep = dual_view_entropy_pruning(in.embeddings, in.cls_logits, o, c.k);
    EXPECT_EQ(dep.anchors, sorted(ref.order));
    // The pick order too, on the library's own z and entropies.
    EXPECT_EQ(entropy_penalized_greedy(dep.z, dep.saliency.entropy, dep.saliency.normalized, c.eta, c.k),
              reference_greedy(dep.z, dep.saliency.entropy, dep.saliency.normalized, c.eta, c.k));
    EXPECT_TRUE(torch::allclose(dep.z, ref.z, 1e-5, 1e-6));
    EXPECT_TRUE(torch::allclose(dep.saliency.entropy, ref.entropy, 1e-5, 1e-5));
    if (c.h == 1) {
      EXPECT_EQ(ref.order.front(), 0);
    }  // all entropies tie at 0: the first token starts
  }
}

TEST(DepGreedy, RawEntropyPenaltyWhenAsked) {
  // Flat head maps: raw entropies all sit just under ln H, so only the min-max version spreads
  // them enough for the penalty to matter.
  auto in = test::random_reduction_input(120, 32, 16, 20, 7);
  in.cls_logits = in.cls_logits * 0.1;
  EraOptions o;
  o.eta = 0.5f;
  const auto ref_normalized = reference_dep(in.embeddings, in.cls_logits, o.alpha, o.eta, o.epsilon, 20, true);
  const auto ref_raw = reference_dep(in.embeddings, in.cls_logits, o.alpha, o.eta, o.epsilon, 20, false);
  ASSERT_NE(sorted(ref_raw.order), sorted(ref_normalized.order)) << "inputs too easy to tell the penalties apart";
  EXPECT_EQ(dual_view_entropy_pruning(in.embeddings, in.cls_logits, o, 20).anchors, sorted(ref_normalized.order));
  o.normalized_entropy_penalty = false;
  EXPECT_EQ(dual_view_entropy_pruning(in.embeddings, in.cls_logits, o, 20).anchors, sorted(ref_raw.order));
}

// Exactly representable z (multiples of 1/4) and penalties (multiples of 1/2): every similarity
// and score is exact, so many candidates tie exactly and only the tie rule decides.
TEST(DepGreedy, ExactTiesGoToTheLowestIndex) {
  for (const int64_t n : {int64_t{8}, int64_t{33}, int64_t{90}}) {
    for (const int64_t k : {int64_t{2}, int64_t{5}, n / 2, n}) {
      SCOPED_TRACE(testing::Message() << "N=" << n << " K=" << k);
      torch::manual_seed(n * 100 + k);
      const auto z = (torch::randint(-2, 3, {n, 6}) * 0.25).to(torch::kFloat);
      const auto e = (torch::randint(0, 3, {n}) * 0.5).to(torch::kFloat);
      for (const float eta : {0.0f, 0.5f, 1.0f}) {
        EXPECT_EQ(entropy_penalized_greedy(z, e, e, eta, k), reference_greedy(z, e, e, eta, k));
      }
    }
  }
  // Fully degenerate: identical tokens and entropies pick 0, 1, 2, ...
  const auto same = torch::ones({6, 3});
  EXPECT_EQ(entropy_penalized_greedy(same, torch::zeros({6}), torch::zeros({6}), 0.1f, 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(DepGreedy, StartsAtTheMostConfidentTokenAndHandlesBudgets) {
  const auto z = l2_normalize_rows(torch::randn({10, 4}));
  auto e = torch::rand({10}) + 1;
  e[6] = 0.5f;
  EXPECT_EQ(entropy_penalized_greedy(z, e, e, 0.1f, 1), (std::vector<int64_t>{6}));
  EXPECT_TRUE(entropy_penalized_greedy(z, e, e, 0.1f, 0).empty());
  auto all = entropy_penalized_greedy(z, e, e, 0.1f, 25);  // more than N: each token once
  EXPECT_EQ(sorted(all), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// dep-x (alpha = eta = 0, no saliency view) is max-min diversity: each step adds the token whose
// cosine distance to its nearest selected token is largest. Brute force, in double.
TEST(DepGreedy, DepXIsMaxMinDiversity) {
  for (const uint64_t seed : {1, 2, 3}) {
    const int64_t n = 90, k = 15;
    const auto in = test::random_reduction_input(n, 24, 16, k, seed);
    const auto x = in.embeddings.to(torch::kDouble);
    const auto xa = x.accessor<double, 2>();
    const auto entropy = head_entropy(in.cls_logits, 1e-8f).entropy;
    std::vector<int64_t> S{entropy.argmin().item<int64_t>()};
    auto distance = [&](int64_t i, int64_t j) {
      double dot = 0, ni = 0, nj = 0;
      for (int64_t t = 0; t < x.size(1); ++t) {
        dot += xa[i][t] * xa[j][t];
        ni += xa[i][t] * xa[i][t];
        nj += xa[j][t] * xa[j][t];
      }
      return 1.0 - dot / std::sqrt(ni * nj);
    };
    while (static_cast<int64_t>(S.size()) < k) {
      int64_t best = -1;
      double best_min = -1;
      for (int64_t j = 0; j < n; ++j) {
        if (std::find(S.begin(), S.end(), j) != S.end()) continue;
        double nearest = 1e9;
        for (const int64_t s : S) nearest = std::min(nearest, distance(j, s));
        if (nearest > best_min) {
          best = j;
          best_min = nearest;
        }
      }
      S.push_back(best);
    }
    const auto o = apply_era_variant(EraOptions{}, "dep-x");
    EXPECT_EQ(dual_view_entropy_pruning(in.embeddings, in.cls_logits, o, k).anchors, sorted(S)) << "seed " << seed;
    // And alpha = eta = 0 with both views on is the same thing (y gets weight 0 in z).
    EraOptions zero;
    zero.alpha = zero.eta = 0.0f;
    EXPECT_EQ(dual_view_entropy_pruning(in.embeddings, in.cls_logits, zero, k).anchors, sorted(S)) << "seed " << seed;
  }
}

TEST(DepGreedy, AnchorsAscendingAndUnique) {
  const auto in = test::random_reduction_input(300, 48, 16, 40, 11);
  const auto anchors = dual_view_entropy_pruning(in.embeddings, in.cls_logits, EraOptions{}, 40).anchors;
  ASSERT_EQ(anchors.size(), 40u);
  for (size_t i = 1; i < anchors.size(); ++i) EXPECT_LT(anchors[i - 1], anchors[i]);
  EXPECT_GE(anchors.front(), 0);
  EXPECT_LT(anchors.back(), 300);
}

TEST(DepGreedy, DepYIgnoresTheVisualView) {
  auto in = test::random_reduction_input(80, 16, 16, 12, 5);
  const auto o = apply_era_variant(EraOptions{}, "dep-y");
  const auto a = dual_view_entropy_pruning(in.embeddings, in.cls_logits, o, 12).anchors;
  const auto b = dual_view_entropy_pruning(torch::randn({80, 16}), in.cls_logits, o, 12).anchors;
  EXPECT_EQ(a, b);
  // ... and DEP with both views does depend on x.
  EXPECT_NE(dual_view_entropy_pruning(in.embeddings, in.cls_logits, EraOptions{}, 12).anchors,
            dual_view_entropy_pruning(torch::randn({80, 16}), in.cls_logits, EraOptions{}, 12).anchors);
}

}  // namespace
}  // namespace era
