#pragma once
// Internal header. Rotary position embeddings, 1-D (LLaMA, Mistral, Qwen2) and multimodal
// (Qwen2.5-VL's M-RoPE), computed as HF computes them: frequencies and angles in float32, cos and
// sin rounded to the model dtype once.
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace era::layers {

// positions [B, T] (int64), or [B, T, 3] (temporal, height, width) -> cos, sin [B, T, head_dim]
// in `dtype`. With `mrope_section` (summing to head_dim / 2), the frequencies are split into those
// chunks, chunk i taken from axis i % 3; [B, T, 3] positions without one use axis 0.
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& positions, int64_t head_dim, double theta,
                                                     torch::ScalarType dtype, const std::vector<int64_t>& mrope_section);

// x * cos + rotate_half(x) * sin for x [B, H, T, d] and cos / sin [B, T, d].
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace era::layers
