#include "layers/rope.h"

namespace era::layers {

std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& positions, int64_t head_dim, double theta,
                                                     torch::ScalarType dtype, const std::vector<int64_t>& mrope_section) {
  const auto device = positions.device();
  const torch::Tensor exps = torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong).device(device))
                                 .to(torch::kFloat);
  // recomputed per call, never a stored buffer, so that no dtype conversion can round it
  const torch::Tensor inv_freq = torch::reciprocal(torch::pow(theta, exps / static_cast<double>(head_dim)));
  torch::Tensor freqs;
  if (positions.dim() == 3) {
    const torch::Tensor axes = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq;  // [B, T, 3, head_dim / 2]
    if (!mrope_section.empty()) {
      std::vector<torch::Tensor> chunks;
      int64_t start = 0;
      for (size_t i = 0; i < mrope_section.size(); ++i) {
        chunks.push_back(axes.select(2, static_cast<int64_t>(i % 3)).narrow(-1, start, mrope_section[i]));
        start += mrope_section[i];
      }
      freqs = torch::cat(chunks, -1);
    } else {
      freqs = axes.select(2, 0);
    }
  } else {
    freqs = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq;
  }
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const torch::Tensor rotated = torch::cat({-x.narrow(-1, half, x.size(-1) - half), x.narrow(-1, 0, half)}, -1);
  const torch::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  return x * c + rotated * s;
}

}  // namespace era::layers
