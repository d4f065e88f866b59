#include "model/kv_cache.h"

#include "era/error.h"

namespace era {

KvCache::KvCache(const TextSpec& spec, int64_t batch, int64_t capacity, torch::ScalarType dtype, const torch::Device& device)
    : capacity_(capacity) {
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  k_ = torch::zeros({spec.num_layers, batch, spec.num_kv_heads, capacity, spec.cache_head_dim}, opts);
  v_ = torch::zeros_like(k_);
}

void KvCache::advance(int64_t n) {
  if (length_ + n > capacity_) {
    throw Error(ErrorCode::kRuntime, "KV cache overflow: " + std::to_string(length_ + n) + " slots needed, " +
                                         std::to_string(capacity_) + " allocated");
  }
  length_ += n;
}

int64_t KvCache::bytes_allocated() const { return 2 * k_.numel() * static_cast<int64_t>(k_.element_size()); }

int64_t KvCache::bytes_used() const { return capacity_ == 0 ? 0 : bytes_allocated() / capacity_ * length_; }

}  // namespace era
