#include "reduce/random_pruning.h"
#include "reduce/budget.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace era {

std::vector<int64_t> random_select(int64_t n, int64_t k, uint64_t seed) {
  k = effective_budget(k, n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 rng(seed);
  // Not std::uniform_int_distribution / std::shuffle: their algorithms differ between standard
  // libraries. The modulo bias (< n / 2^64) is irrelevant here.
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - i));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

ReducedTokens RandomReducer::reduce(const ReductionInput& input) const {
  return select_tokens(input, random_select(input.embeddings.size(0), input.budget, seed_));
}

}  // namespace era
