#pragma once
// The decoder's preallocated KV cache. Rows are the augmented K~/V~ of the LAR attention
// (cache_head_dim wide, see docs/bundle-format.md), so a key's LAR bias lives with the key and
// decode steps stay rectified without any side table.
//
// Every layer has its own fill length. Normally all layers advance together; in-decoder pruning
// (FastV, DART) fills layers below the pruning layer with the whole prompt and the layers from it
// with the kept tokens only, so the two groups advance separately (advance_layers).
#include <torch/script.h>

#include "model/manifest.h"

#include <vector>

namespace era {

class KvCache {
 public:
  // Allocates [layers, batch, kv_heads, capacity, cache_head_dim] zeros for K and for V.
  KvCache(const TextSpec& spec, int64_t batch, int64_t capacity, torch::ScalarType dtype, const torch::Device& device);

  const torch::Tensor& keys() const { return k_; }
  const torch::Tensor& values() const { return v_; }
  int64_t length() const;                     // slots filled so far (the longest layer)
  int64_t layer_length(int64_t layer) const;  // slots filled in one layer
  int64_t num_layers() const { return k_.size(0); }
  bool uniform() const;                           // every layer holds the same number of slots
  int64_t capacity() const { return capacity_; }  // slots allocated
  int64_t batch() const { return k_.size(1); }

  // Marks `n` more slots as filled in every layer (after the decoder wrote them); throws if that
  // overflows or the layers' lengths differ.
  void advance(int64_t n);
  // The same for layers [begin, end) only, which must hold the same number of slots.
  void advance_layers(int64_t begin, int64_t end, int64_t n);
  void reset();

  int64_t bytes_allocated() const;
  int64_t bytes_used() const;  // the filled slots only, layer by layer

 private:
  torch::Tensor k_, v_;
  int64_t capacity_ = 0;
  std::vector<int64_t> lengths_;  // per layer
};

}  // namespace era
