#include "kernels/int8_linear.h"

#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_linear.h"
#include "kernels/linear_shape.h"

// CMake defines ERA_WITH_CUDA_KERNELS where era_core has its CUDA kernels (a CUDA LibTorch).
#if defined(ERA_WITH_CUDA_KERNELS)
#include <c10/core/DeviceGuard.h>

#include "kernels/int8_linear_cuda.h"
#include "util/device.h"
#endif

namespace era {

namespace {

void check_arguments(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                     const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kChar, "era::int8_linear: weight must be int8 [N, K], got ",
              weight.scalar_type(), " ", weight.sizes());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "era::int8_linear: x ", x.sizes(), " does not match weight ",
              weight.sizes());
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == weight.size(0), "era::int8_linear: scales ", scales.sizes(),
              " do not match weight ", weight.sizes());
  TORCH_CHECK(!bias || !bias->defined() || (bias->dim() == 1 && bias->size(0) == weight.size(0)), "era::int8_linear: bias ",
              bias->sizes(), " does not match weight ", weight.sizes());
}

// The generic GEMM path: x2 [M, K] in the matmul dtype against the weight, converted a slice at
// a time into a kept buffer on the CPU (model/cpu_widened_linear.h); elsewhere (a GPU call era's
// CUDA kernels do not take: K not a multiple of 16) the whole weight at once, as slices would
// cost launches.
torch::Tensor generic_products(const torch::Tensor& x2, const torch::Tensor& weight) {
  if (weight.is_cpu() && x2.is_cpu()) return sliced_products(x2, weight).to(torch::kFloat);
  return torch::matmul(x2, weight.to(x2.scalar_type()).t()).to(torch::kFloat);
}

#if defined(ERA_WITH_CUDA_KERNELS)
// The kernels' element type for `dtype`, or none (no kernel for it).
c10::optional<CudaFloat> cuda_float(torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return CudaFloat::kFloat32;
  if (dtype == torch::kHalf) return CudaFloat::kFloat16;
  if (dtype == torch::kBFloat16) return CudaFloat::kBfloat16;
  return c10::nullopt;
}

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// What both CUDA kernels need: x, the weight and the scales on one GPU, a computing dtype they
// have, and weight rows of a whole number of 16-byte loads.
bool cuda_kernels_apply(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                        torch::ScalarType dtype) {
  return x.is_cuda() && weight.is_cuda() && scales.is_cuda() && x.device() == weight.device() &&
         scales.device() == weight.device() && cuda_float(dtype).has_value() && weight.size(0) >= 1 && weight.size(1) % 16 == 0;
}

// era's CUDA kernel (model/int8_linear_cuda.h) where it applies: x, the weight and the scales on
// one GPU, at most kInt8CudaMaxRows rows, K a multiple of 16 and 16-byte aligned rows. Returns an
// undefined tensor otherwise (the caller's GEMM path takes the call).
torch::Tensor cuda_kernel_linear(const torch::Tensor& x, int64_t M, const torch::Tensor& weight, const torch::Tensor& scales,
                                 const c10::optional<torch::Tensor>& bias) {
  const int64_t N = weight.size(0), K = weight.size(1);
  const torch::ScalarType dtype = x.scalar_type();
  if (M < 1 || M > kInt8CudaMaxRows || !cuda_kernels_apply(x, weight, scales, dtype)) return {};
  const torch::Tensor xc = x.reshape({M, K}).contiguous(), wc = weight.contiguous();
  if (!aligned16(xc) || !aligned16(wc)) return {};
  const torch::Tensor s = scales.to(torch::kFloat).contiguous();
  torch::Tensor b;
  if (bias && bias->defined()) b = bias->to(weight.device(), torch::kFloat).contiguous();
  const c10::DeviceGuard guard(x.device());
  torch::Tensor y = torch::empty({M, N}, xc.options());
  const int status = launch_int8_gemv_cuda(xc.data_ptr(), wc.data_ptr<int8_t>(), s.data_ptr<float>(),
                                           b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr(), M, N, K, *cuda_float(dtype),
                                           device::current_cuda_stream(x.device()));
  TORCH_CHECK(status == 0, "era::int8_linear: the CUDA kernel failed to launch (cudaError ", status, ")");
  return y;
}

// A larger call on a GPU: the weight dequantised (scales applied, model/int8_linear_cuda.h) into a
// buffer of the GEMM's dtype, then one cuBLAS product with the bias: two launches, the GEMM's
// output final. The buffer is the whole weight (a 7B MLP weight in bf16: 90 MB, reused by the
// caching allocator): dequantising 8, 16 or 32 MB of rows at a time into one buffer that stays in
// the H100's 50 MB L2 was measured slower at 160 and 600 rows (docs/perf/: the narrower GEMMs cost more
// than the saved memory traffic). Returns an undefined tensor where the kernel does not apply (the
// caller's generic path takes the call).
torch::Tensor cuda_dequantized_gemm(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& scales,
                                    const c10::optional<torch::Tensor>& bias, torch::ScalarType dtype) {
  const int64_t M = x2.size(0), N = weight.size(0), K = weight.size(1);
  if (M < 1 || K == 0 || !cuda_kernels_apply(x2, weight, scales, dtype)) return {};
  const torch::Tensor wc = weight.contiguous();
  if (!aligned16(wc)) return {};
  const c10::DeviceGuard guard(x2.device());
  const torch::Tensor s = scales.to(torch::kFloat).contiguous(), x = x2.to(dtype);
  // the caching allocator's blocks start 512-byte aligned: the kernel's 16-byte stores line up
  torch::Tensor dequantized = torch::empty({N, K}, x.options());
  const int status = launch_int8_dequantize_cuda(wc.data_ptr<int8_t>(), s.data_ptr<float>(), dequantized.data_ptr(), N, K,
                                                 *cuda_float(dtype), device::current_cuda_stream(x.device()));
  TORCH_CHECK(status == 0, "era::int8_linear: the CUDA dequantisation failed to launch (cudaError ", status, ")");
  if (bias && bias->defined()) return torch::addmm(bias->to(x.device(), dtype), x, dequantized.t());
  return torch::mm(x, dequantized.t());
}
#endif

}  // namespace

torch::Tensor int8_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                          const c10::optional<torch::Tensor>& bias, int64_t gemv_max_rows, int64_t upcast_min_rows) {
  check_arguments(x, weight, scales, bias);
  const int64_t K = weight.size(1), N = weight.size(0);
  const int64_t M = linear_rows(x);
  const std::vector<int64_t> shape = linear_output_shape(x, N);
  const bool widen = upcast_min_rows > 0 && M >= upcast_min_rows;
#if defined(ERA_WITH_CUDA_KERNELS)
  // On a GPU: a few rows take the kernel that applies scales and bias itself (one launch), more
  // the dequantised weight's cuBLAS product.
  if (M <= gemv_max_rows) {
    if (torch::Tensor direct = cuda_kernel_linear(x, M, weight, scales, bias); direct.defined()) return direct.view(shape);
  }
  if (M > 0) {
    const torch::ScalarType dtype = widen ? torch::kFloat : x.scalar_type();
    torch::Tensor direct = cuda_dequantized_gemm(x.reshape({M, K}), weight, scales, bias, dtype);
    if (direct.defined()) return direct.to(x.scalar_type()).view(shape);
  }
#endif
  if (M >= 1 && M <= gemv_max_rows && K > 0 && x.is_cpu() && weight.is_cpu() && gemv_kernel_available()) {
    return gemv_fused(x, weight, scales, bias, x.scalar_type()).view(shape);  // scales and bias applied in the kernel
  }
  const torch::ScalarType dtype = widen ? torch::kFloat : x.scalar_type();
  torch::Tensor y = generic_products(x.reshape({M, K}).to(dtype).contiguous(), weight);  // float32 [M, N]: the unscaled sums
  y.mul_(scales.to(torch::kFloat));
  if (bias && bias->defined()) y.add_(bias->to(torch::kFloat));
  return y.to(x.scalar_type()).view(shape);
}

int64_t int8_cuda_kernel_max_rows() {
#if defined(ERA_WITH_CUDA_KERNELS)
  return kInt8CudaMaxRows;
#else
  return 0;
#endif
}

void register_int8_linear_operator() {}  // the registrations below run when this object is linked in

// The bundle format's operator (the schema is fixed: bundles carry calls to it). One kernel for
// every device: the kernel path applies to CPU tensors only.
TORCH_LIBRARY_FRAGMENT(era, m) {
  m.def("int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias, int gemv_max_rows, int upcast_min_rows) -> Tensor");
}
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("int8_linear", &int8_linear); }

}  // namespace era
