#pragma once
// Internal header. LLaMA's RMSNorm with HF's roundings: normalised in float32, rounded to the
// input's dtype, then scaled by the weight in that dtype (LlamaRMSNorm).
#include <torch/torch.h>

namespace era::layers {

inline torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xf = x.to(torch::kFloat);
  xf = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * xf.to(x.scalar_type());
}

}  // namespace era::layers
