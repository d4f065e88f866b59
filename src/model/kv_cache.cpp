#include "model/kv_cache.h"

#include <algorithm>
#include <numeric>

#include "era/error.h"
#include "kernels/huge_pages.h"

namespace era {

KvCache::KvCache(const TextSpec& spec, int64_t batch, int64_t capacity, torch::ScalarType dtype, const torch::Device& device)
    : capacity_(capacity), lengths_(static_cast<size_t>(spec.num_layers), 0) {
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  // on the CPU in huge pages (model/huge_pages.h): a decode step reads the whole cache so far
  k_ = zeros_in_huge_pages({spec.num_layers, batch, spec.num_kv_heads, capacity, spec.cache_head_dim}, opts);
  v_ = zeros_in_huge_pages(k_.sizes(), opts);
}

int64_t KvCache::length() const { return lengths_.empty() ? 0 : *std::max_element(lengths_.begin(), lengths_.end()); }

int64_t KvCache::layer_length(int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) {
    throw Error(ErrorCode::kInvalidArgument,
                "KV cache: no layer " + std::to_string(layer) + " (the cache has " + std::to_string(num_layers()) + ")");
  }
  return lengths_[static_cast<size_t>(layer)];
}

bool KvCache::uniform() const {
  return std::all_of(lengths_.begin(), lengths_.end(), [&](int64_t n) { return n == lengths_.front(); });
}

void KvCache::advance(int64_t n) {
  if (!uniform()) throw Error(ErrorCode::kRuntime, "KV cache: the layers hold different lengths (a pruned cache)");
  advance_layers(0, num_layers(), n);
}

void KvCache::advance_layers(int64_t begin, int64_t end, int64_t n) {
  if (begin < 0 || end > num_layers() || begin >= end) {
    throw Error(ErrorCode::kInvalidArgument,
                "KV cache: bad layer range [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  }
  const int64_t length = lengths_[static_cast<size_t>(begin)];
  for (int64_t l = begin; l < end; ++l) {
    if (lengths_[static_cast<size_t>(l)] != length) {
      throw Error(ErrorCode::kRuntime,
                  "KV cache: layers " + std::to_string(begin) + ".." + std::to_string(end - 1) + " hold different lengths");
    }
  }
  if (length + n > capacity_) {
    throw Error(ErrorCode::kRuntime, "KV cache overflow: " + std::to_string(length + n) + " slots needed, " +
                                         std::to_string(capacity_) + " allocated");
  }
  for (int64_t l = begin; l < end; ++l) lengths_[static_cast<size_t>(l)] += n;
}

void KvCache::reset() { std::fill(lengths_.begin(), lengths_.end(), 0); }

int64_t KvCache::bytes_allocated() const { return 2 * k_.numel() * static_cast<int64_t>(k_.element_size()); }

int64_t KvCache::bytes_used() const {
  if (capacity_ == 0 || lengths_.empty()) return 0;
  const int64_t per_slot_and_layer = bytes_allocated() / capacity_ / num_layers();
  return per_slot_and_layer * std::accumulate(lengths_.begin(), lengths_.end(), int64_t{0});
}

}  // namespace era
