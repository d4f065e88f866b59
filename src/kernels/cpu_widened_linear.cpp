#include "kernels/cpu_widened_linear.h"

#include <torch/library.h>

#include <algorithm>

#include "kernels/linear_shape.h"

namespace era {

namespace {

// The calling thread's conversion buffer, grown to `bytes` on first need and kept: reused, its
// pages stay mapped (the point of it: model/cpu_widened_linear.h).
void* thread_buffer(int64_t bytes) {
  thread_local torch::Tensor buffer;
  if (!buffer.defined() || buffer.numel() < bytes) buffer = torch::empty({bytes}, torch::dtype(torch::kByte));
  return buffer.data_ptr();
}

}  // namespace

torch::Tensor sliced_products(const torch::Tensor& x2, const torch::Tensor& weight) {
  const int64_t M = x2.size(0), N = weight.size(0), K = weight.size(1);
  const torch::ScalarType dtype = x2.scalar_type();
  if (M == 0 || N == 0 || K == 0) return torch::zeros({M, N}, x2.options());
  const int64_t row_bytes = K * static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t step = std::min(N, std::max<int64_t>(1, kWidenSliceBytes / row_bytes));
  void* buffer = thread_buffer(step * row_bytes);
  torch::Tensor y = torch::empty({M, N}, x2.options());
  for (int64_t n0 = 0; n0 < N; n0 += step) {
    const int64_t n = std::min(step, N - n0);
    torch::Tensor converted = torch::from_blob(buffer, {n, K}, x2.options());
    converted.copy_(weight.narrow(0, n0, n));
    // a column block of y: LibTorch's GEMM writes it in place through its leading dimension
    torch::Tensor columns = y.narrow(1, n0, n);
    torch::mm_out(columns, x2, converted.t());
  }
  return y;
}

torch::Tensor widened_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 2, "era::widened_linear: weight must be [N, K], got ", weight.sizes());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "era::widened_linear: x ", x.sizes(), " does not match weight ",
              weight.sizes());
  const bool has_bias = bias && bias->defined();
  TORCH_CHECK(!has_bias || (bias->dim() == 1 && bias->size(0) == weight.size(0)), "era::widened_linear: bias ", bias->sizes(),
              " does not match weight ", weight.sizes());
  const int64_t N = weight.size(0), K = weight.size(1);
  const torch::Tensor b = has_bias ? bias->to(torch::kFloat) : torch::Tensor();
  if (!x.is_cpu() || !weight.is_cpu()) return torch::linear(x.to(torch::kFloat), weight.to(torch::kFloat), b).to(x.scalar_type());
  torch::Tensor y = sliced_products(x.reshape({linear_rows(x), K}).to(torch::kFloat).contiguous(), weight);
  if (has_bias) y.add_(b);
  return y.to(x.scalar_type()).view(linear_output_shape(x, N));
}

void register_widened_linear_operator() {}  // the registrations below run when this object is linked in

// The bundle format's operator (the schema is fixed: bundles carry calls to it).
TORCH_LIBRARY_FRAGMENT(era, m) { m.def("widened_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor"); }
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("widened_linear", &widened_linear); }

}  // namespace era
