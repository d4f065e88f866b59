#pragma once
// LLaVA's question sharding (llava/eval/model_vqa_loader.py: split_list / get_chunk): the
// question list is cut into chunks of ceil(len / n) questions and chunk k is run. With that size
// there can be fewer than n non-empty chunks (10 questions in 4 chunks: 3+3+3+1; 9 in 4: 3+3+3);
// LLaVA raises IndexError for a chunk past the last one, here it is simply empty.
#include <cstdint>

namespace era::eval {

struct ChunkRange {
  int64_t begin = 0, end = 0;  // question positions [begin, end)
  int64_t size() const { return end - begin; }
  bool contains(int64_t i) const { return i >= begin && i < end; }
};

// Throws era::Error(kInvalidArgument) unless num_chunks >= 1 and 0 <= chunk_idx < num_chunks.
ChunkRange chunk_range(int64_t total, int64_t num_chunks, int64_t chunk_idx);

}  // namespace era::eval
