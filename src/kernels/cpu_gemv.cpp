#include "kernels/cpu_gemv.h"

#include <ATen/Parallel.h>
#include <cpuid.h>
#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "kernels/cpu_widened_attention.h"
#include "kernels/cpu_widened_linear.h"
#include "kernels/int8_linear.h"
#include "kernels/linear_shape.h"
#include "kernels/onednn_linear.h"
#include "util/kernel_threads.h"

namespace era {

namespace {

// Weight rows per inner block: four independent FMA chains (enough to keep a core streaming) and
// 4 * K * 2 bytes of weights (32 KB at K = 4096) that stay in cache while each of the few
// activation rows passes over them.
constexpr int64_t kRowsPerBlock = 4;
// Weight rows per parallel task: 256 rows of a 4096-wide bf16 matrix are 2 MB, large enough that
// a thread streams long runs and small enough that both threads get work on every linear.
constexpr int64_t kRowsPerTask = 256;

#define ERA_GEMV_TARGET __attribute__((target("avx2,fma,f16c")))

// The weight formats the kernel reads: 16-bit floats widened in registers, or int8 converted
// (an int8 weight's per-row scale is applied to the finished sums: model/int8_linear.h).
enum class Format { kBfloat16, kFloat16, kInt8 };

template <Format F>
using Elem = std::conditional_t<F == Format::kInt8, int8_t, uint16_t>;

template <Format F>
ERA_GEMV_TARGET inline __m256 load8(const Elem<F>* p) {
  if constexpr (F == Format::kInt8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (F == Format::kBfloat16) {
      // bf16 is the top half of a float32: widen to 32 bits and shift into place.
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

template <Format F>
inline float scalar(Elem<F> v) {
  if constexpr (F == Format::kBfloat16) {
    return static_cast<float>(c10::BFloat16(v, c10::BFloat16::from_bits()));
  } else if constexpr (F == Format::kFloat16) {
    return static_cast<float>(c10::Half(v, c10::Half::from_bits()));
  } else {
    return static_cast<float>(v);
  }
}

ERA_GEMV_TARGET inline float sum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Where block_row's prefetches of the next block go. Into L1 (T0) where that block fits beside the
// one being read: at most kL1PrefetchBytes, half the smallest L1d of current x86 cores (32 KB).
// A larger one (a 16-bit block of 4 x 4096 weights is 32 KB) prefetched into L1 evicts lines of
// the current block before they are read, so it goes to L2 (T1), from where the core's own L1
// prefetcher takes it. Measured on docs/perf/'s Xeon without AMX (48 KB L1d), a 7B-width decode
// step's 57 products, hints alternating in one process: bf16 T0 181 ms, T1 164-170 ms; int8
// (4 x 4096 bytes: 16 KB) 89.5 / 90.7 ms, the same either way.
enum class Prefetch { kNone, kL1, kL2 };
constexpr int64_t kL1PrefetchBytes = 16 * 1024;

// Four weight rows against one activation row: eight FMA chains, two per row (16 weights per row
// per step), so that a core is not held to one FMA's latency per row and step; int8 weights cost
// more instructions per byte than bf16 ones (measured on docs/perf/'s AMX VM, one thread, three
// alternating runs: int8 9.0-13.6 GB/s with one chain per row, 13.7-14.6 with two; bf16 within
// the noise, 13-17 either way). P: also ask for the next block's rows (the 4 * K elements that
// follow), one block ahead of the hardware prefetcher, which on its own keeps too few lines in
// flight for four interleaved streams (measured on docs/perf/'s EPYC: 19 -> 23 GB/s with two
// threads); see Prefetch for where to.
template <Format F, Prefetch P>
ERA_GEMV_TARGET inline void block_row(const float* xm, const Elem<F>* w0, int64_t K, float* out) {
  const Elem<F>* w1 = w0 + K;
  const Elem<F>* w2 = w1 + K;
  const Elem<F>* w3 = w2 + K;
  const int64_t ahead = kRowsPerBlock * K;
  const int64_t k16 = K - K % 16, k8 = K - K % 8;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  __m256 b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k < k16; k += 16) {
    if constexpr (P != Prefetch::kNone) {  // a hint: never faults, even past the end of the matrix
      constexpr auto hint = P == Prefetch::kL1 ? _MM_HINT_T0 : _MM_HINT_T1;
      _mm_prefetch(reinterpret_cast<const char*>(w0 + k + ahead), hint);
      _mm_prefetch(reinterpret_cast<const char*>(w1 + k + ahead), hint);
      _mm_prefetch(reinterpret_cast<const char*>(w2 + k + ahead), hint);
      _mm_prefetch(reinterpret_cast<const char*>(w3 + k + ahead), hint);
    }
    const __m256 x0 = _mm256_loadu_ps(xm + k), x1 = _mm256_loadu_ps(xm + k + 8);
    a0 = _mm256_fmadd_ps(load8<F>(w0 + k), x0, a0);
    b0 = _mm256_fmadd_ps(load8<F>(w0 + k + 8), x1, b0);
    a1 = _mm256_fmadd_ps(load8<F>(w1 + k), x0, a1);
    b1 = _mm256_fmadd_ps(load8<F>(w1 + k + 8), x1, b1);
    a2 = _mm256_fmadd_ps(load8<F>(w2 + k), x0, a2);
    b2 = _mm256_fmadd_ps(load8<F>(w2 + k + 8), x1, b2);
    a3 = _mm256_fmadd_ps(load8<F>(w3 + k), x0, a3);
    b3 = _mm256_fmadd_ps(load8<F>(w3 + k + 8), x1, b3);
  }
  for (; k < k8; k += 8) {
    const __m256 xv = _mm256_loadu_ps(xm + k);
    a0 = _mm256_fmadd_ps(load8<F>(w0 + k), xv, a0);
    a1 = _mm256_fmadd_ps(load8<F>(w1 + k), xv, a1);
    a2 = _mm256_fmadd_ps(load8<F>(w2 + k), xv, a2);
    a3 = _mm256_fmadd_ps(load8<F>(w3 + k), xv, a3);
  }
  a0 = _mm256_add_ps(a0, b0), a1 = _mm256_add_ps(a1, b1), a2 = _mm256_add_ps(a2, b2), a3 = _mm256_add_ps(a3, b3);
  float s0 = sum8(a0), s1 = sum8(a1), s2 = sum8(a2), s3 = sum8(a3);
  for (int64_t k = k8; k < K; ++k) {
    s0 += scalar<F>(w0[k]) * xm[k];
    s1 += scalar<F>(w1[k]) * xm[k];
    s2 += scalar<F>(w2[k]) * xm[k];
    s3 += scalar<F>(w3[k]) * xm[k];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

#define ERA_GEMV512_TARGET __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))

// block_row for bf16 weights on AVX-512: 16 weights a register, 32 a row and step, so one
// prefetch per row and step covers exactly the 64-byte line it asks for. Half the instructions
// of the AVX2 loop per byte: on a 2-core Zen 5 VM the AVX2 kernel streamed a 7B-width decode
// step's weights at about 70 % of llama.cpp's AVX512-BF16 rate (docs/perf/amd-epyc-zen5.md).
ERA_GEMV512_TARGET inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // the zero-masked forms with every lane kept: GCC 12's unmasked ones pass an undefined register
  // through, and warn of it
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}

// The two halves added, then sum8; through memory, once a block: GCC 12's reduce and extract
// intrinsics pass an undefined register through inside its own header, and warn of it.
ERA_GEMV512_TARGET inline float sum16(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return sum8(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

template <Prefetch P>
ERA_GEMV512_TARGET inline void block_row_bf16_avx512(const float* xm, const uint16_t* w0, int64_t K, float* out) {
  const uint16_t* w[kRowsPerBlock] = {w0, w0 + K, w0 + 2 * K, w0 + 3 * K};
  const int64_t ahead = kRowsPerBlock * K;
  const int64_t k32 = K - K % 32;
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k < k32; k += 32) {
    if constexpr (P != Prefetch::kNone) {
      constexpr auto hint = P == Prefetch::kL1 ? _MM_HINT_T0 : _MM_HINT_T1;
      for (int r = 0; r < kRowsPerBlock; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + k + ahead), hint);
    }
    const __m512 x0 = _mm512_loadu_ps(xm + k), x1 = _mm512_loadu_ps(xm + k + 16);
    a0 = _mm512_fmadd_ps(load16(w[0] + k), x0, a0);
    b0 = _mm512_fmadd_ps(load16(w[0] + k + 16), x1, b0);
    a1 = _mm512_fmadd_ps(load16(w[1] + k), x0, a1);
    b1 = _mm512_fmadd_ps(load16(w[1] + k + 16), x1, b1);
    a2 = _mm512_fmadd_ps(load16(w[2] + k), x0, a2);
    b2 = _mm512_fmadd_ps(load16(w[2] + k + 16), x1, b2);
    a3 = _mm512_fmadd_ps(load16(w[3] + k), x0, a3);
    b3 = _mm512_fmadd_ps(load16(w[3] + k + 16), x1, b3);
  }
  float s[kRowsPerBlock] = {sum16(_mm512_add_ps(a0, b0)), sum16(_mm512_add_ps(a1, b1)), sum16(_mm512_add_ps(a2, b2)),
                            sum16(_mm512_add_ps(a3, b3))};
  for (; k < K; ++k)
    for (int r = 0; r < kRowsPerBlock; ++r) s[r] += scalar<Format::kBfloat16>(w[r][k]) * xm[k];
  for (int r = 0; r < kRowsPerBlock; ++r) out[r] = s[r];
}

#define ERA_GEMV_BF16DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma,f16c")))

// R weight rows against one bf16 activation row with AVX512-BF16's dot product (vdpbf16ps: 32
// bf16 pairs multiplied exactly and summed into 16 float32 lanes), no widening at all: a bf16
// model's activations are bf16 already, so the products are those of the widening loops, summed
// in another order. Measured on the 2-vCPU Zen 5 VM (docs/perf/amd-epyc-zen5.md), a 7B-width decode
// step's 57 products (3.5 GB), 2 threads, alternating in one process: this loop 48-52 GB/s, the
// AVX-512 widening loop 36-37 GB/s with its prefetches and 42-43 without. It asks for no
// prefetches: there they cost 12 % (43 vs 48-52 GB/s); the hardware prefetcher keeps up with
// four streams this loop consumes with half the instructions. The K % 32 tail is a masked load
// (zeros past the end: the masked-off lanes are not read, so cannot fault).
ERA_GEMV_BF16DOT_TARGET inline __m512bh bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

template <int R>
ERA_GEMV_BF16DOT_TARGET inline void block_row_bf16_dot(const uint16_t* xm, const uint16_t* w0, int64_t K, float* out) {
  static_assert(R >= 1 && R <= kRowsPerBlock, "one block at most");
  __m512 a[R], b[R];
  for (int r = 0; r < R; ++r) a[r] = b[r] = _mm512_setzero_ps();
  const int64_t k64 = K - K % 64, k32 = K - K % 32;
  int64_t k = 0;
  for (; k < k64; k += 64) {
    const __m512bh x0 = bh(_mm512_loadu_si512(xm + k)), x1 = bh(_mm512_loadu_si512(xm + k + 32));
    // unrolled whatever the optimisation level: as a loop over arrays, GCC -O2 kept the
    // accumulators in memory (35 GB/s against 51 with -O3 on the Zen 5 VM)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      a[r] = _mm512_dpbf16_ps(a[r], bh(_mm512_loadu_si512(w0 + r * K + k)), x0);
      b[r] = _mm512_dpbf16_ps(b[r], bh(_mm512_loadu_si512(w0 + r * K + k + 32)), x1);
    }
  }
  for (; k < k32; k += 32) {
    const __m512bh x0 = bh(_mm512_loadu_si512(xm + k));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) a[r] = _mm512_dpbf16_ps(a[r], bh(_mm512_loadu_si512(w0 + r * K + k)), x0);
  }
  if (k < K) {
    const __mmask32 keep = (__mmask32{1} << (K - k)) - 1;
    const __m512bh x0 = bh(_mm512_maskz_loadu_epi16(keep, xm + k));
    for (int r = 0; r < R; ++r) b[r] = _mm512_dpbf16_ps(b[r], bh(_mm512_maskz_loadu_epi16(keep, w0 + r * K + k)), x0);
  }
  for (int r = 0; r < R; ++r) out[r] = sum16(_mm512_add_ps(a[r], b[r]));
}

std::atomic<int> g_loop_limit{static_cast<int>(GemvLoop::kAvx512Bf16)};

GemvLoop cpu_best_loop() {
  static const GemvLoop best = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) return GemvLoop::kAvx2;
    return __builtin_cpu_supports("avx512bf16") ? GemvLoop::kAvx512Bf16 : GemvLoop::kAvx512;
  }();
  return best;
}

// The loop bf16 weights take: the best the CPU has, at most the limit set.
GemvLoop bf16_loop() {
  return static_cast<GemvLoop>(std::min(static_cast<int>(cpu_best_loop()), g_loop_limit.load(std::memory_order_relaxed)));
}

// One block of four rows against one float32 activation row, through the loop the format and
// CPU take.
template <Format F, Prefetch P>
ERA_GEMV_TARGET inline void any_block_row(bool wide, const float* xm, const Elem<F>* w0, int64_t K, float* out) {
  if constexpr (F == Format::kBfloat16) {
    if (wide) return block_row_bf16_avx512<P>(xm, w0, K, out);
  }
  block_row<F, P>(xm, w0, K, out);
}

// Where the sums go: y[m, n] = sum * scale[n] + bias[n] (each where given), stored as T (float,
// c10::BFloat16 or c10::Half: one rounding, to nearest even, as LibTorch's conversions round).
// Doing it here saves a decode step a float32 result and two or three passes over it per linear.
template <typename T>
struct Epilogue {
  T* y;
  int64_t N;
  const float* scale;  // nullable
  const float* bias;   // nullable
  void operator()(int64_t m, int64_t n, float s) const {
    if (scale) s *= scale[n];
    if (bias) s += bias[n];
    y[m * N + n] = static_cast<T>(s);
  }
};

// Sums for weight rows [n0, n1): x float32 [M, K], w [N, K] in format F. The block's weights
// come from memory for the first activation row and from cache for the others.
template <Format F, typename Store>
ERA_GEMV_TARGET void rows_kernel(const float* x, int64_t M, const Elem<F>* w, int64_t K, int64_t n0, int64_t n1,
                                 const Store& store) {
  const int64_t k8 = K - K % 8;
  const bool l1_prefetch = kRowsPerBlock * K * static_cast<int64_t>(sizeof(Elem<F>)) <= kL1PrefetchBytes;
  const bool wide = F == Format::kBfloat16 && bf16_loop() >= GemvLoop::kAvx512;
  int64_t n = n0;
  for (; n + kRowsPerBlock <= n1; n += kRowsPerBlock) {
    float out[kRowsPerBlock];
    for (int64_t m = 0; m < M; ++m) {
      if (m > 0) {
        any_block_row<F, Prefetch::kNone>(wide, x + m * K, w + n * K, K, out);  // the block is in cache now
      } else if (l1_prefetch) {
        any_block_row<F, Prefetch::kL1>(wide, x, w + n * K, K, out);
      } else {
        any_block_row<F, Prefetch::kL2>(wide, x, w + n * K, K, out);
      }
      for (int64_t r = 0; r < kRowsPerBlock; ++r) store(m, n + r, out[r]);
    }
  }
  for (; n < n1; ++n) {
    const Elem<F>* wn = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * K;
      __m256 a = _mm256_setzero_ps();
      for (int64_t k = 0; k < k8; k += 8) a = _mm256_fmadd_ps(load8<F>(wn + k), _mm256_loadu_ps(xm + k), a);
      float s = sum8(a);
      for (int64_t k = k8; k < K; ++k) s += scalar<F>(wn[k]) * xm[k];
      store(m, n, s);
    }
  }
}

// The same for bf16 weights and bf16 activations x [M, K] through block_row_bf16_dot.
template <typename Store>
ERA_GEMV_BF16DOT_TARGET void rows_kernel_bf16_dot(const uint16_t* x, int64_t M, const uint16_t* w, int64_t K, int64_t n0,
                                                  int64_t n1, const Store& store) {
  int64_t n = n0;
  float out[kRowsPerBlock];
  for (; n + kRowsPerBlock <= n1; n += kRowsPerBlock) {
    for (int64_t m = 0; m < M; ++m) {
      block_row_bf16_dot<kRowsPerBlock>(x + m * K, w + n * K, K, out);
      for (int64_t r = 0; r < kRowsPerBlock; ++r) store(m, n + r, out[r]);
    }
  }
  for (; n < n1; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      block_row_bf16_dot<1>(x + m * K, w + n * K, K, out);
      store(m, n, out[0]);
    }
  }
}

bool kernel_applies(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!x.device().is_cpu() || !weight.device().is_cpu() || weight.dim() != 2 || x.dim() < 1) return false;
  if (weight.scalar_type() != torch::kBFloat16 && weight.scalar_type() != torch::kHalf) return false;
  const auto xt = x.scalar_type();
  if (xt != torch::kFloat && xt != torch::kBFloat16 && xt != torch::kHalf) return false;
  if (x.size(-1) != weight.size(1) || weight.size(1) == 0) return false;
  const int64_t rows = x.numel() / x.size(-1);
  return rows >= 1 && rows <= kGemvMaxRows && gemv_kernel_available();
}

template <typename Store>
void run_rows(const torch::Tensor& x, int64_t M, const torch::Tensor& w, int64_t K, int64_t N, const Store& store) {
  if (w.scalar_type() == torch::kBFloat16 && x.scalar_type() == torch::kBFloat16 && bf16_loop() == GemvLoop::kAvx512Bf16) {
    const torch::Tensor xb = x.reshape({M, K}).contiguous();
    const auto* xp = static_cast<const uint16_t*>(xb.data_ptr());
    const auto* wp = static_cast<const uint16_t*>(w.data_ptr());
    kernel_parallel_for(0, N, kRowsPerTask, [&](int64_t n0, int64_t n1) { rows_kernel_bf16_dot(xp, M, wp, K, n0, n1, store); });
    return;
  }
  const torch::Tensor xf = x.reshape({M, K}).to(torch::kFloat).contiguous();
  const float* xp = xf.data_ptr<float>();
  const auto run = [&](auto format) {
    constexpr Format F = decltype(format)::value;
    const auto* wp = static_cast<const Elem<F>*>(w.data_ptr());
    kernel_parallel_for(0, N, kRowsPerTask, [&](int64_t n0, int64_t n1) { rows_kernel<F>(xp, M, wp, K, n0, n1, store); });
  };
  switch (w.scalar_type()) {
    case torch::kBFloat16: run(std::integral_constant<Format, Format::kBfloat16>{}); break;
    case torch::kHalf: run(std::integral_constant<Format, Format::kFloat16>{}); break;
    case torch::kChar: run(std::integral_constant<Format, Format::kInt8>{}); break;
    default: TORCH_CHECK(false, "era::gemv: weight dtype ", w.scalar_type(), " (bf16, fp16 or int8 expected)");
  }
}

torch::Tensor gemv_operator(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
  return gemv_linear(x, weight, bias);
}

}  // namespace

bool gemv_kernel_available() {
  static const bool available = [] {
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29) rather than __builtin_cpu_supports("f16c"), which
    // clang 14 (Debian 12's, used by tools/sanitize.sh and tools/fuzz.sh) rejects at compile time.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return available;
}

torch::Tensor gemv_fused(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                         const c10::optional<torch::Tensor>& bias, torch::ScalarType out_dtype) {
  const int64_t K = weight.size(1), N = weight.size(0);
  const int64_t M = linear_rows(x);
  const torch::Tensor w = weight.contiguous();
  torch::Tensor s, b;  // float32 [N], or undefined
  if (scales.defined()) s = scales.to(torch::kFloat).contiguous();
  if (bias && bias->defined()) b = bias->to(torch::kFloat).contiguous();
  const float* sp = s.defined() ? s.data_ptr<float>() : nullptr;
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  torch::Tensor y = torch::empty({M, N}, x.options().dtype(out_dtype));
  switch (out_dtype) {
    case torch::kFloat: run_rows(x, M, w, K, N, Epilogue<float>{y.data_ptr<float>(), N, sp, bp}); break;
    case torch::kBFloat16: run_rows(x, M, w, K, N, Epilogue<c10::BFloat16>{y.data_ptr<c10::BFloat16>(), N, sp, bp}); break;
    case torch::kHalf: run_rows(x, M, w, K, N, Epilogue<c10::Half>{y.data_ptr<c10::Half>(), N, sp, bp}); break;
    default: TORCH_CHECK(false, "era::gemv: output dtype ", out_dtype, " (float32, bf16 or fp16 expected)");
  }
  return y;
}

torch::Tensor gemv_products(const torch::Tensor& x, const torch::Tensor& weight) {
  return gemv_fused(x, weight, torch::Tensor(), c10::nullopt, torch::kFloat);
}

torch::Tensor gemv_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
  if (!kernel_applies(x, weight)) return torch::linear(x, weight, bias);
  return gemv_fused(x, weight, torch::Tensor(), bias, x.scalar_type()).view(linear_output_shape(x, weight.size(0)));
}

GemvLoop gemv_best_loop() { return gemv_kernel_available() ? cpu_best_loop() : GemvLoop::kAvx2; }

void limit_gemv_loop(GemvLoop limit) { g_loop_limit.store(static_cast<int>(limit)); }

GemvLoop gemv_bf16_loop() { return bf16_loop(); }

int parallel_for_threads() {
  std::atomic<int> pieces{0};  // one per thread: the loop hands each thread one contiguous piece
  kernel_parallel_for(0, 1 << 16, 1, [&](int64_t, int64_t) { pieces.fetch_add(1); });
  return pieces.load();
}

// The registrations below run when this object is linked in; int8_linear.cpp's with it.
void register_era_operators() {
  register_int8_linear_operator();
  register_onednn_linear_operator();
  register_widened_linear_operator();
  register_widened_attention_operator();
}

// The bundle format's operators (the schema is fixed: bundles carry calls to it).
TORCH_LIBRARY(era, m) { m.def("gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor"); }
TORCH_LIBRARY_IMPL(era, CPU, m) { m.impl("gemv", &gemv_operator); }
// Any other device: LibTorch's own product (the runtime only asks for era::gemv on the CPU).
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("gemv", &gemv_operator); }

}  // namespace era
