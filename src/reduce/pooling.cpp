#include "reduce/pooling.h"
#include "reduce/budget.h"

#include <algorithm>
#include <cmath>

#include "era/error.h"

namespace era {

PoolGrid pool_grid(int64_t budget, int64_t side) {
  if (keeps_all(budget, side * side)) return {side, side};
  PoolGrid g;
  g.rows =
      std::min<int64_t>(side, std::max<int64_t>(1, static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(budget))))));
  while (g.rows * g.rows > budget) --g.rows;  // guard against sqrt rounding up
  g.cols = std::min<int64_t>(side, budget / g.rows);
  return g;
}

int64_t pool_bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t pool_bin_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

ReducedTokens PoolReducer::reduce(const ReductionInput& input) const {
  const int64_t n = input.embeddings.size(0);
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  if (side * side != n) {
    throw Error(ErrorCode::kInvalidArgument,
                "pool: " + std::to_string(n) + " tokens are not a square grid (pool one crop at a time)");
  }
  const PoolGrid g = pool_grid(input.budget, side);
  const torch::Tensor grid = input.embeddings.to(torch::kFloat).reshape({side, side, -1});
  std::vector<torch::Tensor> cells;
  ReducedTokens out;
  for (int64_t r = 0; r < g.rows; ++r) {
    const int64_t r0 = pool_bin_start(r, side, g.rows), r1 = pool_bin_end(r, side, g.rows);
    const auto anchor_r = static_cast<int64_t>(std::floor((static_cast<double>(r) + 0.5) * side / g.rows));
    for (int64_t c = 0; c < g.cols; ++c) {
      const int64_t c0 = pool_bin_start(c, side, g.cols), c1 = pool_bin_end(c, side, g.cols);
      cells.push_back(grid.slice(0, r0, r1).slice(1, c0, c1).mean(std::vector<int64_t>{0, 1}));
      const auto anchor_c = static_cast<int64_t>(std::floor((static_cast<double>(c) + 0.5) * side / g.cols));
      out.kept.push_back(anchor_r * side + anchor_c);
    }
  }
  out.embeddings = torch::stack(cells, 0).to(input.embeddings.scalar_type());
  out.log_bias = torch::zeros({g.rows * g.cols}, torch::TensorOptions().dtype(torch::kFloat).device(input.embeddings.device()));
  out.assignment.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < side; ++r) {
    for (int64_t c = 0; c < side; ++c) {
      out.assignment[static_cast<size_t>(r * side + c)] = (r * g.rows / side) * g.cols + c * g.cols / side;
    }
  }
  return out;
}

}  // namespace era
