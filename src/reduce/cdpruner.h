#pragma once
// CDPruner (NeurIPS'25), the "model without a text encoder" variant (baselines.md §5.6): LLaVA
// checkpoints carry no CLIP text tower, so relevance compares the post-projector visual tokens P
// with the decoder's input embeddings of the instruction's text tokens instead of CLIP image/text
// embeddings. Similarity, kernel and the fast greedy DPP MAP follow the official code
// (Theia-4869/CDPruner, llava_arch.py encode_images).
#include <torch/script.h>

#include <vector>

#include "reduce/reducer.h"

namespace era {

// rel_i = (sign) * mean_m cos(P_i, E_m) for tokens P [N, D] and instruction embeddings E [M, D]
// (float32 [N]); sign -1 if `negate` (the official CLIP-text variant's inverted relevance).
// M = 0 gives zeros.
torch::Tensor cdpruner_relevance(const torch::Tensor& tokens, const torch::Tensor& instruction, bool negate);

// (rel - lo + 1e-6) / (hi - lo), the official min-max; all ones when hi == lo (nothing to rank).
torch::Tensor cdpruner_normalise(const torch::Tensor& rel, double lo, double hi);

// L = diag(r) S diag(r) with S the cosine similarity of `tokens` [N, D]; float32 [N, N].
torch::Tensor cdpruner_kernel(const torch::Tensor& tokens, const torch::Tensor& r);

// Greedy MAP of the DPP with kernel `L` [N, N] (positive semi-definite), the fast incremental
// Cholesky form (Chen et al. 2018): each step picks argmax of the remaining marginal gain d_j^2,
// which equals det(L_{S+j}) / det(L_S); exactly `k` picks (no early stop, as the official code),
// ties to the first index. Returned ascending. k <= 0 or k >= N keeps all. Once the kernel's rank
// is exhausted the gains are clamped at 1e-12, so the remaining picks stay distinct and finite.
std::vector<int64_t> dpp_greedy_map(const torch::Tensor& L, int64_t k);

class CdPrunerReducer final : public Reducer {
 public:
  explicit CdPrunerReducer(bool negate_relevance) : negate_(negate_relevance) {}
  std::string name() const override { return "cdpruner"; }
  // Needs input.instruction_embeddings; min-max over input.image_embeddings when given (all crops
  // of the image, as the official NeXT path), else over this input's tokens.
  ReducedTokens reduce(const ReductionInput& input) const override;

 private:
  bool negate_;
};

}  // namespace era
