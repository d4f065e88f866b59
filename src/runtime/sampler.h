#pragma once
// Stage 6: picks the next token from the last position's logits.
#include <torch/script.h>

#include <cstdint>
#include <random>

namespace era {

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // nucleus size, in (0, 1]
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws era::Error(kInvalidArgument) for a negative temperature or top_p outside (0, 1].
  explicit Sampler(const SamplingOptions& options);

  // `logits`: [V] (any dtype/device). Greedy returns the first index of the maximum, like
  // torch.argmax; sampling draws from softmax(logits / T) restricted to the top-p nucleus, with a
  // CPU generator seeded once, so a seed gives the same tokens on every device.
  int64_t next(const torch::Tensor& logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace era
