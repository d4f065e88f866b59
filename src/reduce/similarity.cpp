#include "reduce/similarity.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace era {
namespace {

// 32 independent partial sums: the compiler maps them onto vector registers, and the sums do not
// wait on each other's additions. On x86-64 with GCC an AVX2+FMA clone is picked at load time where
// the CPU has it (wider registers, fused multiply-add).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 32;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

torch::Tensor row_dots(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor af = a.to(torch::kFloat).contiguous(), bf = b.to(af.device(), torch::kFloat).contiguous();
  if (!af.is_cpu()) return torch::mm(af, bf.t());
  const int64_t n = af.size(0), k = bf.size(0), d = af.size(1);
  torch::Tensor out = torch::empty({n, k}, af.options());
  const float* ap = af.data_ptr<float>();
  const float* bp = bf.data_ptr<float>();
  float* op = out.data_ptr<float>();
  // Rows are independent; the grain keeps tiny problems on one thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, k * d));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < k; ++j) op[i * k + j] = dot(ap + i * d, bp + j * d, d);
    }
  });
  return out;
}

}  // namespace era
