#include "reduce/reducer.h"

#include <numeric>

namespace era {

ReducedTokens FullReducer::reduce(const ReductionInput& input) const {
  ReducedTokens out;
  out.embeddings = input.embeddings;
  const int64_t n = input.embeddings.size(0);
  out.log_bias = torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat).device(input.embeddings.device()));
  out.kept.resize(static_cast<size_t>(n));
  std::iota(out.kept.begin(), out.kept.end(), int64_t{0});
  out.assignment = out.kept;
  return out;
}

}  // namespace era
