#include "layers/linear.h"

#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_linear.h"
#include "kernels/onednn_linear.h"

namespace era::layers {

bool widens(const torch::Tensor& x, int64_t rows, int64_t min_rows) {
  return min_rows > 0 && rows >= min_rows && x.scalar_type() != torch::kFloat && x.device().is_cpu();
}

torch::Tensor matmul_f32(const torch::Tensor& a, const torch::Tensor& b, bool widened) {
  if (widened) return torch::matmul(a.to(torch::kFloat), b.to(torch::kFloat)).to(a.scalar_type());
  return torch::matmul(a, b);
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const LinearRouting& routing) {
  const int64_t rows = x.numel() / std::max<int64_t>(x.size(-1), 1);
  const c10::optional<torch::Tensor> b = bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  if (rows > 0 && rows <= routing.gemv_max_rows) return gemv_linear(x, weight, b);
  if (routing.onednn) return onednn_linear(x, weight, b);
  if (widens(x, rows, routing.upcast_min_rows)) return widened_linear(x, weight, b);
  return torch::linear(x, weight, bias);
}

}  // namespace era::layers
