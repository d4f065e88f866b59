#include "reduce/cdpruner.h"
#include "reduce/budget.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "era/error.h"

namespace era {
namespace {

torch::Tensor unit_rows(const torch::Tensor& x) {
  const torch::Tensor f = x.to(torch::kFloat);
  return f / f.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
}

}  // namespace

torch::Tensor cdpruner_relevance(const torch::Tensor& tokens, const torch::Tensor& instruction, bool negate) {
  if (!instruction.defined() || instruction.size(0) == 0) {
    return torch::zeros({tokens.size(0)}, torch::TensorOptions().dtype(torch::kFloat).device(tokens.device()));
  }
  if (instruction.dim() != 2 || instruction.size(1) != tokens.size(1)) {
    throw Error(ErrorCode::kInvalidArgument,
                "cdpruner: instruction embeddings must be [M, " + std::to_string(tokens.size(1)) + "]");
  }
  const torch::Tensor rel = torch::matmul(unit_rows(tokens), unit_rows(instruction.to(tokens.device())).t()).mean(1);
  return negate ? -rel : rel;
}

torch::Tensor cdpruner_normalise(const torch::Tensor& rel, double lo, double hi) {
  if (!(hi > lo)) return torch::ones_like(rel);
  return (rel - lo + 1e-6) / (hi - lo);
}

torch::Tensor cdpruner_kernel(const torch::Tensor& tokens, const torch::Tensor& r) {
  const torch::Tensor u = unit_rows(tokens);
  const torch::Tensor s = torch::matmul(u, u.t());
  return r.unsqueeze(1) * s * r.unsqueeze(0);
}

std::vector<int64_t> dpp_greedy_map(const torch::Tensor& L, int64_t k) {
  if (!L.defined() || L.dim() != 2 || L.size(0) != L.size(1))
    throw Error(ErrorCode::kInvalidArgument, "dpp: kernel must be [N, N]");
  const int64_t n = L.size(0);
  k = effective_budget(k, n);
  if (k == n) return all_indices(n);
  std::vector<int64_t> picked;
  const torch::Tensor kernel = L.to(torch::kFloat);
  torch::Tensor gain = kernel.diagonal().clone();            // d_j^2: det(L_{S+j}) / det(L_S)
  torch::Tensor c = torch::zeros({k, n}, kernel.options());  // rows of the incremental Cholesky factor
  // Past the kernel's numerical rank (tokens narrower than the budget, or many equal tokens, as a
  // bfloat16 model gives) the remaining gains are float32 rounding noise. Dividing by them (the
  // official code divides by ~0 and gets NaN) amplifies that noise step after step until it
  // overflows, and a NaN gain makes argmax repeat a pick. Below this floor no update is made: the
  // remaining picks go in order of their residual gain.
  const double noise_floor = 1e-6 * std::max(gain.max().item<double>(), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = gain.argmax().item<int64_t>();
    picked.push_back(j);
    const double gain_j = gain[j].item<double>();
    if (gain_j > noise_floor) {
      torch::Tensor e = kernel[j].clone();
      if (i > 0) {
        const torch::Tensor prev = c.slice(0, 0, i);  // [i, N]
        e -= torch::matmul(prev.select(1, j), prev);
      }
      e /= std::sqrt(gain_j);
      c[i] = e;
      gain -= e * e;
    }
    gain.index_put_({j}, -std::numeric_limits<double>::infinity());
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

ReducedTokens CdPrunerReducer::reduce(const ReductionInput& input) const {
  const torch::Tensor& p = input.embeddings;
  if (!input.instruction_embeddings.defined()) {
    throw Error(ErrorCode::kInvalidArgument, "cdpruner needs the instruction's token embeddings (none were given)");
  }
  const torch::Tensor rel = cdpruner_relevance(p, input.instruction_embeddings, negate_);
  // The official min-max runs over every crop of the image at once.
  const torch::Tensor range =
      input.image_embeddings.defined() ? cdpruner_relevance(input.image_embeddings, input.instruction_embeddings, negate_) : rel;
  const double lo = range.min().item<double>(), hi = range.max().item<double>();
  const torch::Tensor r = cdpruner_normalise(rel, lo, hi);
  return select_tokens(input, dpp_greedy_map(cdpruner_kernel(p, r), input.budget));
}

}  // namespace era
