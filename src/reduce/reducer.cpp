#include "reduce/reducer.h"

#include <numeric>

#include "era/error.h"

namespace era {

ReducedTokens select_tokens(const ReductionInput& input, const std::vector<int64_t>& kept) {
  const int64_t n = input.embeddings.size(0);
  ReducedTokens out;
  out.kept = kept;
  out.assignment.assign(static_cast<size_t>(n), -1);
  for (size_t s = 0; s < kept.size(); ++s) {
    const int64_t idx = kept[s];
    if (idx < 0 || idx >= n || (s > 0 && kept[s - 1] >= idx)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "select_tokens: kept indices must be ascending and in [0, " + std::to_string(n) + ")");
    }
    out.assignment[static_cast<size_t>(idx)] = static_cast<int64_t>(s);
  }
  const auto device = input.embeddings.device();
  const auto index = torch::tensor(kept, torch::TensorOptions().dtype(torch::kLong)).to(device);
  out.embeddings = input.embeddings.index_select(0, index);
  out.log_bias = torch::zeros({static_cast<int64_t>(kept.size())}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  return out;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

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
