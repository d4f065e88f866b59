#pragma once
// "random": a uniformly random subset of the visual tokens, the sanity floor of every pruning
// comparison. Seeded (BaselineOptions::random_seed), so runs repeat; kept in raster order.
#include <cstdint>
#include <vector>

#include "reduce/reducer.h"

namespace era {

// `k` distinct indices out of [0, n), ascending, from a partial Fisher-Yates shuffle driven by
// std::mt19937_64(seed) (its output sequence is fixed by the standard, so the choice is the same
// on every platform). k <= 0 or k >= n keeps all.
std::vector<int64_t> random_select(int64_t n, int64_t k, uint64_t seed);

class RandomReducer final : public Reducer {
 public:
  explicit RandomReducer(uint64_t seed) : seed_(seed) {}
  std::string name() const override { return "random"; }
  // Every crop of a LLaVA-NeXT image uses the same seed, so the same positions in each crop.
  ReducedTokens reduce(const ReductionInput& input) const override;

 private:
  uint64_t seed_;
};

}  // namespace era
