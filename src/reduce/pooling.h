#pragma once
// "pool": uniform spatial average pooling of the visual tokens, the structure-blind baseline.
// The crop's sqrt(N) x sqrt(N) token grid (24 x 24) is average-pooled adaptively (PyTorch's
// adaptive_avg_pool2d bins) to rows x cols cells, rows = floor(sqrt(budget)) and
// cols = floor(budget / rows) (both at most the grid side), so the count never exceeds the
// budget and is as close to it as a grid allows: 64 -> 8x8, 128 -> 11x11 = 121, 192 -> 13x14 = 182,
// 32 -> 5x6 = 30. Pooling runs on the post-projector embeddings (float32 means).
#include <cstdint>
#include <vector>

#include "reduce/reducer.h"

namespace era {

struct PoolGrid {
  int64_t rows = 0, cols = 0;
};

// The pooled grid for `budget` tokens out of a side x side grid (budget <= 0 or >= side^2: the
// full grid).
PoolGrid pool_grid(int64_t budget, int64_t side);

// Bin i of `out` adaptive bins over `in` cells: [floor(i*in/out), ceil((i+1)*in/out)).
int64_t pool_bin_start(int64_t i, int64_t in, int64_t out);
int64_t pool_bin_end(int64_t i, int64_t in, int64_t out);

class PoolReducer final : public Reducer {
 public:
  std::string name() const override { return "pool"; }
  // One token per cell, raster order: the mean of the cell's bin. kept = the patch at the bin's
  // ideal centre, floor((i + 0.5) * side / rows) (ascending, distinct); assignment: patch (r, c)
  // goes to cell (floor(r*rows/side), floor(c*cols/side)), a bin that contains it (adaptive bins
  // can overlap by one patch; the overlap is averaged into both, as PyTorch does).
  // Throws era::Error(kInvalidArgument) if N is not a square.
  ReducedTokens reduce(const ReductionInput& input) const override;
};

}  // namespace era
