#include "apps/bench/machine_limits.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <vector>

#include "apps/bench/core_latency.h"
#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_attention.h"
#include "kernels/huge_pages.h"
#include "kernels/int8_linear.h"
#include "kernels/onednn_linear.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "util/cpu_threads.h"
#include "util/kernel_threads.h"
#include "util/openblas_core.h"

namespace era::bench {
namespace {

// Best wall time of `f` in seconds, over repeated runs lasting about `budget` seconds (one
// untimed run first: page faults, kernel selection).
template <typename F>
double best_seconds(F&& f, double budget) {
  using clock = std::chrono::steady_clock;
  f();
  double best = 1e30;
  const auto start = clock::now();
  int runs = 0;
  while (runs < 3 || std::chrono::duration<double>(clock::now() - start).count() < budget) {
    const auto t0 = clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    if (++runs >= 1000) break;
  }
  return best;
}

// Copies of a decode-sized weight, taken in turn by successive calls (next()), as a decode step
// takes successive layers, so that none is still in the last-level cache: 1 GiB of copies (one
// bf16 copy of LLaMA-7B's MLP up-projection is 90 MB; a server's L3 is 32 MB or more, the 2-vCPU
// Sapphire Rapids VM of docs/perf/ reports 300 MB), at least four. The copies are clones of one
// random weight: cloning runs at memory speed, while drawing 1 GiB of random numbers for each of
// the three GEMV rows took most of --machine's time (30 s on one thread).
class UncachedWeights {
 public:
  explicit UncachedWeights(const torch::Tensor& weight) {
    const int64_t copy_bytes = weight.numel() * static_cast<int64_t>(weight.element_size());
    const int64_t copies = std::max<int64_t>(4, ((int64_t{1} << 30) + copy_bytes - 1) / copy_bytes);
    // in huge pages, as a session keeps its decoder's weights (model/huge_pages.h); a plain clone
    // where Linux has none (copy_to_huge_pages then hands back the weight itself)
    for (int64_t i = 0; i < copies; ++i) {
      torch::Tensor copy = copy_to_huge_pages(weight);
      copies_.push_back(copy.data_ptr() == weight.data_ptr() ? weight.clone() : copy);
    }
  }
  const torch::Tensor& next() { return copies_[next_++ % copies_.size()]; }

 private:
  std::vector<torch::Tensor> copies_;
  size_t next_ = 0;
};

}  // namespace

GemmProbe::GemmProbe(torch::ScalarType dtype)
    : x_(torch::randn({kM, kK}, torch::TensorOptions().dtype(dtype))),
      w_(torch::randn({kN, kK}, torch::TensorOptions().dtype(dtype))) {
  if (dtype == torch::kBFloat16 && cpu_packs_bf16_for_onednn()) packed_ = pack_for_onednn(w_);
}

double GemmProbe::plain_gflops(double seconds) const {
  torch::NoGradGuard no_grad;
  return 2.0 * kM * kK * kN / best_seconds([&] { (void)torch::linear(x_, w_); }, seconds) / 1e9;
}

double GemmProbe::packed_gflops(double seconds) const {
  if (!packed_.defined()) return 0;
  torch::NoGradGuard no_grad;
  return 2.0 * kM * kK * kN / best_seconds([&] { (void)onednn_linear(x_, packed_, c10::nullopt); }, seconds) / 1e9;
}

double GemmProbe::gflops(double seconds) const {
  if (!packed_.defined()) return plain_gflops(seconds);
  return std::max(plain_gflops(seconds / 2), packed_gflops(seconds / 2));
}

// In huge pages, as the weights a decode step streams (model/huge_pages.h): the rate is the
// memory's, not the page walks'.
ReadProbe::ReadProbe() : data_(copy_to_huge_pages(torch::ones({kBytes / 4}, torch::kFloat))) {}

double ReadProbe::gbs(double seconds) const {
  torch::NoGradGuard no_grad;
  return static_cast<double>(kBytes) / best_seconds([&] { (void)data_.sum(); }, seconds) / 1e9;
}

MachineLimits measure_machine(int threads, double seconds) {
  torch::NoGradGuard no_grad;
  MachineLimits m;
  // first, while no OpenMP worker is still spinning on the second CPU after a parallel region
  m.core_to_core_ns = core_to_core_ns();
  m.threads = configure_cpu_threads(threads);  // the thread count a Session would use
  m.kernel_threads = kernel_threads();
  if (!at::hasMKL()) m.openblas_core = openblas_core_name();
  const double slice = seconds / 10.0;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto opt = torch::TensorOptions().dtype(dtype);
    // prefill-like: 512 tokens through a 4096 -> 4096 projection (LLaMA-7B's attention width)
    const int64_t M = GemmProbe::kM, K = GemmProbe::kK, N = GemmProbe::kN;
    const GemmProbe probe(dtype);
    m.gemm.push_back({dtype_name(dtype), M, K, N, probe.plain_gflops(slice)});
    if (probe.packs()) m.gemm.push_back({"bf16-pack", M, K, N, probe.packed_gflops(slice)});
    if (dtype == torch::kBFloat16) {  // what --cpu-matmul float32 runs: both operands widened per call
      const torch::Tensor x = torch::randn({M, K}, opt), w = torch::randn({N, K}, opt);
      const double tw = best_seconds([&] { (void)torch::linear(x.to(torch::kFloat), w.to(torch::kFloat)).to(dtype); }, slice);
      m.gemm.push_back({"bf16>f32", M, K, N, 2.0 * M * K * N / tw / 1e9});
    }
    // decode-like: one token through LLaMA-7B's MLP up-projection, a fresh weight copy per call
    const int64_t K1 = 4096, N1 = 11008;
    const torch::Tensor x1 = torch::randn({1, K1}, opt);
    const int64_t copy_bytes = K1 * N1 * static_cast<int64_t>(torch::elementSize(dtype));
    UncachedWeights w1(torch::randn({N1, K1}, opt));
    const double bytes = static_cast<double>(copy_bytes);
    const double t1 = best_seconds([&] { (void)torch::linear(x1, w1.next()); }, slice);
    m.gemv.push_back({dtype_name(dtype), 1, K1, N1, 2.0 * K1 * N1 / t1 / 1e9});
    m.gemv_gbs.push_back(bytes / t1 / 1e9);
    if (dtype == torch::kBFloat16 && gemv_kernel_available()) {  // era's decode kernel (model/cpu_gemv.h)
      const double te = best_seconds([&] { (void)gemv_linear(x1, w1.next(), c10::nullopt); }, slice);
      m.gemv.push_back({"era-bf16", 1, K1, N1, 2.0 * K1 * N1 / te / 1e9});
      m.gemv_gbs.push_back(bytes / te / 1e9);
      // the same kernel held to each plainer loop the CPU has, for comparison
      for (const auto& [loop, name] : {std::pair{GemvLoop::kAvx512, "era-avx512"}, std::pair{GemvLoop::kAvx2, "era-avx2"}}) {
        if (loop >= gemv_best_loop()) continue;
        limit_gemv_loop(loop);
        const double t2 = best_seconds([&] { (void)gemv_linear(x1, w1.next(), c10::nullopt); }, slice);
        limit_gemv_loop(GemvLoop::kAvx512Bf16);
        m.gemv.push_back({name, 1, K1, N1, 2.0 * K1 * N1 / t2 / 1e9});
        m.gemv_gbs.push_back(bytes / t2 / 1e9);
      }
    }
  }
  if (gemv_kernel_available()) {  // the same product with weight-only int8 weights (model/int8_linear.h)
    const int64_t K1 = 4096, N1 = 11008;
    const torch::Tensor x1 = torch::randn({1, K1}), scales = torch::rand({N1}) * 0.01;
    UncachedWeights w1(torch::randint(-127, 128, {N1, K1}, torch::kChar));
    const double te = best_seconds([&] { (void)int8_linear(x1, w1.next(), scales, c10::nullopt, kGemvMaxRows, 0); }, slice);
    m.gemv.push_back({"era-int8", 1, K1, N1, 2.0 * K1 * N1 / te / 1e9});
    m.gemv_gbs.push_back(static_cast<double>(K1 * N1) / te / 1e9);
  }
  {  // one CLIP-L/336 attention layer, bf16 widened: the composition and era's kernel
    const int64_t heads = 16, tokens = 577, d = 64;
    const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
    // [B, T, H, d] activations viewed as heads, as the tower makes them
    const torch::Tensor q = torch::randn({1, tokens, heads, d}, bf16).transpose(1, 2);
    const torch::Tensor k = torch::randn({1, tokens, heads, d}, bf16).transpose(1, 2);
    const torch::Tensor v = torch::randn({1, tokens, heads, d}, bf16).transpose(1, 2);
    const double flops = 4.0 * heads * tokens * tokens * d;
    const double to = best_seconds([&] { (void)widened_attention_reference(q, k, v, 0.125, 0, false); }, slice);
    m.attention.push_back({"bf16-ops", heads, tokens, d, flops / to / 1e9});
    const double te = best_seconds([&] { (void)widened_attention(q, k, v, 0.125, 0, false); }, slice);
    m.attention.push_back({"era-bf16", heads, tokens, d, flops / te / 1e9});
  }
  m.read_gbs = ReadProbe().gbs(slice);
  const int64_t bytes = int64_t{1} << 30;  // 512 MiB read + 512 MiB written
  const torch::Tensor src = torch::ones({bytes / 8}, torch::kFloat), dst = torch::empty_like(src);
  m.copy_gbs = static_cast<double>(bytes) / best_seconds([&] { dst.copy_(src); }, slice) / 1e9;
  return m;
}

std::string format_machine(const MachineLimits& m) {
  std::ostringstream os;
  char line[256];
  os << "machine limits (LibTorch kernels; bf16-pack: the weight packed for oneDNN once; era-bf16 / era-int8: era's decode "
        "kernel on bf16 / int8 weights (era-avx512 / era-avx2: its plainer bf16 loops, where the CPU has a better one: "
        "model/cpu_gemv.h); ATTN: one attention layer in bf16, sums in float32, LibTorch's operators "
        "(bf16-ops) or era's kernel (era-bf16); "
     << m.threads << " threads"
     << (m.kernel_threads != m.threads ? ", era's kernel " + std::to_string(m.kernel_threads) : std::string())
     << ", best of repeated runs)\n";
  for (const auto& g : m.gemm) {
    std::snprintf(line, sizeof line, "  GEMM %-8s %lldx%lldx%lld (torch::linear)   %8.1f GFLOP/s\n", g.dtype.c_str(),
                  static_cast<long long>(g.m), static_cast<long long>(g.k), static_cast<long long>(g.n), g.gflops);
    os << line;
  }
  for (size_t i = 0; i < m.gemv.size(); ++i) {
    const auto& g = m.gemv[i];
    std::snprintf(line, sizeof line, "  GEMV %-10s 1x%lldx%lld                %8.1f GFLOP/s  %6.1f GB/s of weights\n",
                  g.dtype.c_str(), static_cast<long long>(g.k), static_cast<long long>(g.n), g.gflops, m.gemv_gbs[i]);
    os << line;
  }
  for (const auto& a : m.attention) {
    char shape[64];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld (CLIP-L layer)", static_cast<long long>(a.heads),
                  static_cast<long long>(a.tokens), static_cast<long long>(a.head_dim));
    std::snprintf(line, sizeof line, "  ATTN %-8s %-32s%8.1f GFLOP/s\n", a.path.c_str(), shape, a.gflops);
    os << line;
  }
  std::snprintf(line, sizeof line, "  memory read (sum of 1 GiB, huge pages)     %8.1f GB/s\n", m.read_gbs);
  os << line;
  std::snprintf(line, sizeof line, "  memory copy (512 MiB, read + written)      %8.1f GB/s\n", m.copy_gbs);
  os << line;
  if (m.core_to_core_ns > 0) {
    std::snprintf(line, sizeof line, "  core to core (a cache line, one way)       %8.1f ns\n", m.core_to_core_ns);
    os << line;
  }
  if (!m.openblas_core.empty()) os << "  LibTorch's BLAS: OpenBLAS, " << m.openblas_core << " kernels\n";
  return os.str();
}

}  // namespace era::bench
