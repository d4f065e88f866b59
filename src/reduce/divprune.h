#pragma once
// DivPrune (CVPR'25): keep the most diverse visual tokens. Greedy max-min selection on the
// post-projector embeddings with cosine distance, as the official code (vbdi/divprune,
// llava_arch.py DivPrune()); see /work/shared/reference/baselines.md §4.
#include <torch/script.h>

#include <vector>

#include "reduce/reducer.h"

namespace era {

// The `k` tokens of `x` [N, D] DivPrune keeps, ascending. Distance d(i, j) = 1 - cos(x_i, x_j).
// The first pick s0 is the token whose second-smallest distance (its nearest neighbour, self
// being the smallest) is largest; each further pick maximises the distance to its closest
// already-picked token. Ties go to the first index; a picked token is never picked again.
// k <= 0 or k >= N keeps all. Cost: O(N^2 D) for s0 (the official rule needs every token's
// nearest neighbour), then O(k N D), one new distance row per pick.
std::vector<int64_t> divprune_select(const torch::Tensor& x, int64_t k);

class DivPruneReducer final : public Reducer {
 public:
  std::string name() const override { return "divprune"; }
  // Keeps divprune_select(input.embeddings, input.budget) as they are.
  ReducedTokens reduce(const ReductionInput& input) const override;
};

}  // namespace era
