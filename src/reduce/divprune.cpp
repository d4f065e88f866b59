#include "reduce/divprune.h"
#include "reduce/budget.h"

#include <algorithm>
#include <limits>

#include "era/error.h"

namespace era {

std::vector<int64_t> divprune_select(const torch::Tensor& x, int64_t k) {
  if (!x.defined() || x.dim() != 2) throw Error(ErrorCode::kInvalidArgument, "divprune: tokens must be [N, D]");
  const int64_t n = x.size(0);
  k = effective_budget(k, n);
  if (k == n) return all_indices(n);
  std::vector<int64_t> picked;
  // float32 on the tokens' device (the official code runs in the model dtype; float32 keeps
  // near-ties from depending on it).
  const torch::Tensor xf = x.to(torch::kFloat);
  const torch::Tensor xn = xf / xf.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
  // s0: argmax over columns of the second-smallest distance in that column.
  torch::Tensor s0_index;
  {
    const torch::Tensor dist = 1.0 - torch::matmul(xn, xn.t());  // [N, N]
    const torch::Tensor second = std::get<0>(torch::topk(dist, 2, /*dim=*/0, /*largest=*/false, /*sorted=*/true))[1];
    s0_index = second.argmax();
  }
  int64_t s = s0_index.item<int64_t>();
  picked.push_back(s);
  // Distance of every token to its closest picked token, refreshed with one row per pick.
  torch::Tensor closest = 1.0 - torch::matmul(xn, xn[s]);
  const double removed = -std::numeric_limits<double>::infinity();
  closest.index_put_({s}, removed);
  while (static_cast<int64_t>(picked.size()) < k) {
    s = closest.argmax().item<int64_t>();
    picked.push_back(s);
    closest = torch::minimum(closest, 1.0 - torch::matmul(xn, xn[s]));
    closest.index_put_({s}, removed);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

ReducedTokens DivPruneReducer::reduce(const ReductionInput& input) const {
  return select_tokens(input, divprune_select(input.embeddings, input.budget));
}

}  // namespace era
