#include "reduce/reducer.h"

#include <numeric>

#include "era/error.h"

namespace era {

ReducedTokens FullReducer::reduce(const ReductionInput& input) const {
  ReducedTokens out;
  out.embeddings = input.embeddings;
  const int64_t n = input.embeddings.size(0);
  out.log_bias = torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat).device(input.embeddings.device()));
  out.kept.resize(static_cast<size_t>(n));
  std::iota(out.kept.begin(), out.kept.end(), int64_t{0});
  return out;
}

std::unique_ptr<Reducer> make_reducer(const std::string& method) {
  if (method == "full") return std::make_unique<FullReducer>();
  throw Error(ErrorCode::kInvalidArgument, "unknown reduction method '" + method + "' (available: full)");
}

}  // namespace era
