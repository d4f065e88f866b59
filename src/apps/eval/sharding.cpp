#include "apps/eval/sharding.h"

#include <algorithm>
#include <string>

#include "era/error.h"

namespace era::eval {

ChunkRange chunk_range(int64_t total, int64_t num_chunks, int64_t chunk_idx) {
  if (num_chunks < 1) throw Error(ErrorCode::kInvalidArgument, "--num-chunks must be >= 1");
  if (chunk_idx < 0 || chunk_idx >= num_chunks) {
    throw Error(ErrorCode::kInvalidArgument, "--chunk-idx must be in [0, " + std::to_string(num_chunks) + ")");
  }
  ChunkRange r;
  if (total <= 0) return r;
  const int64_t size = (total + num_chunks - 1) / num_chunks;  // math.ceil(len / n)
  r.begin = std::min(total, chunk_idx * size);
  r.end = std::min(total, r.begin + size);
  return r;
}

}  // namespace era::eval
