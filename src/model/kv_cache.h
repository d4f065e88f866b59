#pragma once
// The decoder's preallocated KV cache. Rows are the augmented K~/V~ of the LAR attention
// (cache_head_dim wide, see models/BUNDLE_FORMAT.md), so a key's LAR bias lives with the key and
// decode steps stay rectified without any side table.
#include <torch/script.h>

#include "model/manifest.h"

namespace era {

class KvCache {
 public:
  // Allocates [layers, batch, kv_heads, capacity, cache_head_dim] zeros for K and for V.
  KvCache(const TextSpec& spec, int64_t batch, int64_t capacity, torch::ScalarType dtype, const torch::Device& device);

  const torch::Tensor& keys() const { return k_; }
  const torch::Tensor& values() const { return v_; }
  int64_t length() const { return length_; }      // slots filled so far
  int64_t capacity() const { return capacity_; }  // slots allocated
  int64_t batch() const { return k_.size(1); }

  // Marks `n` more slots as filled (after the decoder wrote them); throws if that overflows.
  void advance(int64_t n);
  void reset() { length_ = 0; }

  int64_t bytes_allocated() const;
  int64_t bytes_used() const;  // the filled slots only

 private:
  torch::Tensor k_, v_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
};

}  // namespace era
