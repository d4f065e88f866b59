#include "kernels/cpu_widened_attention.h"

#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "kernels/cpu_convert.h"
#include "util/compat.h"
#include "util/kernel_threads.h"

namespace era {

namespace {

// Query rows per block: a block's float32 scores (rows x Tk) stay at most 4 MB, within the L2 and
// L3 of the CPUs measured; CLIP-L/336's 577 x 577 head is one block.
constexpr int64_t kScoreBlockElements = int64_t{1} << 20;

// f rounded to bf16 (nearest, ties to even) and back: the value a bf16 tensor would hold.
inline float bf16_value(float f) { return static_cast<float>(c10::BFloat16(f)); }

// exp(x) for x <= 0 (scores less their row's maximum): Cephes' expf polynomial, within 2 float32
// ulp, flushed to 0 below -87.3 where the float32 result would be subnormal; the probabilities
// are rounded to bf16 (8 bits of mantissa) after it. One formula in scalar and vector form, so a
// row's tail is treated as its body.
constexpr float kExpLow = -87.3365447504f, kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

inline float exp_nonpositive(float x) {
  if (!(x >= kExpLow)) return x != x ? x : 0.0f;
  const float n = std::floor(x * kLog2e + 0.5f);
  const float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = kP0;
  for (const float c : {kP1, kP2, kP3, kP4, kP5}) p = p * r + c;
  const float y = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

bool has_avx2_fma() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

#define ERA_ATTN_TARGET __attribute__((target("avx2,fma")))

ERA_ATTN_TARGET inline __m256 bf16_value8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb),
                                           _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
  return _mm256_blendv_ps(_mm256_castsi256_ps(rounded), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // a NaN stays one
}

ERA_ATTN_TARGET inline __m256 exp_nonpositive8(__m256 x) {
  const __m256 low = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLow), _CMP_LT_OQ);
  const __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(kExpLow));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  return _mm256_andnot_ps(low, e);  // below the range: 0 (x is never NaN here: rows are finite)
}

ERA_ATTN_TARGET inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

ERA_ATTN_TARGET inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// One row of float32 products (visible keys first, `visible` of `tk`) in place into its bf16
// probabilities (as float32 values): bf16(s), bf16(s * scale), softmax over the visible keys in
// float32 (the exponentials times the reciprocal of their sum, as LibTorch's vectorised softmax),
// rounded to bf16; the hidden keys get 0.
ERA_ATTN_TARGET void probabilities_avx2(float* s, int64_t visible, int64_t tk, float scale) {
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= visible; j += 8) {
    const __m256 x = bf16_value8(_mm256_mul_ps(bf16_value8(_mm256_loadu_ps(s + j)), vscale));
    _mm256_storeu_ps(s + j, x);
    vmax = _mm256_max_ps(vmax, x);
  }
  float m = horizontal_max(vmax);
  for (; j < visible; ++j) {
    s[j] = bf16_value(bf16_value(s[j]) * scale);
    m = std::max(m, s[j]);
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= visible; j += 8) {
    const __m256 e = exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = horizontal_sum(vsum);
  for (; j < visible; ++j) {
    s[j] = exp_nonpositive(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (j = 0; j + 8 <= visible; j += 8) _mm256_storeu_ps(s + j, bf16_value8(_mm256_mul_ps(_mm256_loadu_ps(s + j), vinv)));
  for (; j < visible; ++j) s[j] = bf16_value(s[j] * inv);
  std::fill(s + visible, s + tk, 0.0f);
}

void probabilities_scalar(float* s, int64_t visible, int64_t tk, float scale) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < visible; ++j) {
    s[j] = bf16_value(bf16_value(s[j]) * scale);
    m = std::max(m, s[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < visible; ++j) {
    s[j] = exp_nonpositive(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < visible; ++j) s[j] = bf16_value(s[j] * inv);
  std::fill(s + visible, s + tk, 0.0f);
}

// The keys query row t (of the whole sequence) sees.
int64_t visible_keys(int64_t t, int64_t tk, int64_t causal_offset, bool causal) {
  return causal ? std::clamp<int64_t>(causal_offset + t + 1, 0, tk) : tk;
}

bool bf16_attention_on_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return q.is_cpu() && k.is_cpu() && v.is_cpu() && q.scalar_type() == torch::kBFloat16 && k.scalar_type() == torch::kBFloat16 &&
         v.scalar_type() == torch::kBFloat16;
}

void check_shapes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "era::widened_attention: q, k and v must be [B, H, T, D], got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), "era::widened_attention: k ", k.sizes(),
              " does not match q ", q.sizes());
  TORCH_CHECK(v.size(0) == q.size(0) && v.size(1) == q.size(1) && v.size(2) == k.size(2), "era::widened_attention: v ", v.sizes(),
              " does not match k ", k.sizes());
}

constexpr int64_t kTileRows = 4;

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

bool has_avx512() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

// C[rows, cols] = A[rows, depth] B[depth, cols], all float32 row-major (A rows lda apart, B and C
// rows ldb / ldc apart; cols a multiple of 16 here, 32 with AVX-512: the callers pad B and C). Register tiles of R rows
// x 16 columns: 2R accumulators, each B row of the strip loaded once per R rows. Why not
// LibTorch's GEMM: these are small products (64-deep for CLIP's heads) that OpenBLAS runs at a
// fifth of its rate, and calling it per head would hand over between its threads and these.
template <int R>
ERA_ATTN_TARGET void gemm_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t depth) {
  __m256 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * lda + k);
      lo[r] = _mm256_fmadd_ps(ar, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(ar, b1, hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, lo[r]);
    _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
  }
}

// The same with AVX-512: 32 columns per tile (cols a multiple of 32), twice the work per load.
template <int R>
__attribute__((target("avx512f"))) void gemm_tile512(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                                     int64_t ldc, int64_t depth) {
  __m512 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * ldb), b1 = _mm512_loadu_ps(b + k * ldb + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * lda + k]);
      lo[r] = _mm512_fmadd_ps(ar, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(ar, b1, hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(c + r * ldc, lo[r]);
    _mm512_storeu_ps(c + r * ldc + 16, hi[r]);
  }
}

// The row and column loops over a tile function: tiles of 4 rows (then 3, 2 or 1 at the bottom)
// by Cols columns; tile(rows, a, b, c) multiplies one.
template <int Cols, typename Tile, typename T>
void gemm_by_tiles(const Tile& tile, const T* a, int64_t lda, const T* b, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; j += Cols) {
    int64_t i = 0;
    for (; i + kTileRows <= rows; i += kTileRows) tile(std::integral_constant<int, 4>{}, a + i * lda, b + j, c + i * ldc + j);
    const T *ai = a + i * lda, *bj = b + j;
    float* cij = c + i * ldc + j;
    switch (rows - i) {
      case 3: tile(std::integral_constant<int, 3>{}, ai, bj, cij); break;
      case 2: tile(std::integral_constant<int, 2>{}, ai, bj, cij); break;
      case 1: tile(std::integral_constant<int, 1>{}, ai, bj, cij); break;
      default: break;
    }
  }
}

void gemm_avx512(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t rows, int64_t cols,
                 int64_t depth) {
  const auto tile = [&](auto r, const float* ai, const float* bj, float* cij) {
    gemm_tile512<decltype(r)::value>(ai, lda, bj, ldb, cij, ldc, depth);
  };
  gemm_by_tiles<32>(tile, a, lda, b, c, ldc, rows, cols);
}

void gemm_avx2(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t rows, int64_t cols,
               int64_t depth) {
  const auto tile = [&](auto r, const float* ai, const float* bj, float* cij) {
    gemm_tile<decltype(r)::value>(ai, lda, bj, ldb, cij, ldc, depth);
  };
  gemm_by_tiles<16>(tile, a, lda, b, c, ldc, rows, cols);
}

void gemm_scalar(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t rows, int64_t cols,
                 int64_t depth) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    std::fill(ci, ci + cols, 0.0f);
    for (int64_t k = 0; k < depth; ++k) {
      const float aik = a[i * lda + k];
      const float* bk = b + k * ldb;
      for (int64_t j = 0; j < cols; ++j) ci[j] += aik * bk[j];
    }
  }
}

bool has_avx512_bf16() {
  static const bool available =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return available;
}

#define ERA_ATTN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

ERA_ATTN_BF16_TARGET inline __m512bh as_bf16_pairs(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

// Two bf16 values as the 32-bit pair AVX512-BF16's dot product takes: `lo` in the low half.
inline uint32_t bf16_pair(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16; }
inline uint16_t bf16_bits(c10::BFloat16 v) { return v.x; }
// A float32 that holds a bf16 value exactly (the probabilities): its top half.
inline uint16_t bf16_bits_of_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

// Vectors of 16 columns per tile: 4 rows x 4 vectors are 16 independent sums, enough to cover
// the dot product's latency.
constexpr int kPairTileVectors = 4;

// C[R, 64] = A B with the depth in bf16 pairs: A's rows are `pairs` 32-bit pairs (lda apart), B's
// rows 64 pair-columns (ldb apart, in 32-bit units): column j of B row i holds the pair
// (b[2i][j], b[2i+1][j]). Each vdpbf16ps adds both products of a pair per lane, exactly, to a
// float32 sum.
template <int R>
ERA_ATTN_BF16_TARGET void dot_tile512(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c, int64_t ldc,
                                      int64_t pairs) {
  __m512 acc[R][kPairTileVectors];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kPairTileVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < pairs; ++i) {
    __m512bh bv[kPairTileVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kPairTileVectors; ++v) bv[v] = as_bf16_pairs(_mm512_loadu_si512(b + i * ldb + 16 * v));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh ar = as_bf16_pairs(_mm512_set1_epi32(static_cast<int>(a[r * lda + i])));
#pragma GCC unroll 4
      for (int v = 0; v < kPairTileVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kPairTileVectors; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
}

void gemm_bf16_pairs(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c, int64_t ldc, int64_t rows,
                     int64_t cols, int64_t pairs) {
  const auto tile = [&](auto r, const uint32_t* ai, const uint32_t* bj, float* cij) {
    dot_tile512<decltype(r)::value>(ai, lda, bj, ldb, cij, ldc, pairs);
  };
  gemm_by_tiles<16 * kPairTileVectors>(tile, a, lda, b, c, ldc, rows, cols);
}

// The product that runs on this CPU, and the column multiple its tiles need (the buffers' padding).
using Gemm = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
struct GemmKernel {
  Gemm run;
  int64_t cols;
};

std::atomic<int> g_pinned_isa{-1};  // -1: the best this CPU has

AttentionIsa current_isa() {
  const int pinned = g_pinned_isa.load();
  if (pinned >= 0) return static_cast<AttentionIsa>(pinned);
  if (has_avx512_bf16() && has_avx2_fma()) return AttentionIsa::kAvx512Bf16;
  return has_avx512() && has_avx2_fma() ? AttentionIsa::kAvx512 : has_avx2_fma() ? AttentionIsa::kAvx2 : AttentionIsa::kScalar;
}

GemmKernel gemm_kernel() {
  switch (current_isa()) {
    case AttentionIsa::kAvx512Bf16: return {gemm_avx512, 16 * kPairTileVectors};  // the padding of attend_head_bf16_pairs's tiles
    case AttentionIsa::kAvx512: return {gemm_avx512, 32};
    case AttentionIsa::kAvx2: return {gemm_avx2, 16};
    default: return {gemm_scalar, 1};
  }
}

struct HeadShape {
  int64_t tq = 0, tk = 0, d = 0, dv = 0, causal_offset = 0;
  bool causal = false;
  float scale = 1;
  GemmKernel gemm = gemm_kernel();
  bool vector = current_isa() != AttentionIsa::kScalar;          // the softmax's AVX2 loops
  bool bf16_pairs = current_isa() == AttentionIsa::kAvx512Bf16;  // attend_head_bf16_pairs
  int64_t tk_padded() const { return round_up(tk, gemm.cols); }
  // The row stride of the transposed keys: the padded width plus a cache line where that width
  // is an even number of lines. The transposition writes a column at a time, and rows a power
  // of two apart share a few cache sets: a decode step's 238 keys padded to 256 (1 KB rows) ran
  // 3x slower than at 240.
  int64_t kt_stride() const { return tk_padded() % 32 == 0 ? tk_padded() + 16 : tk_padded(); }
  int64_t dv_padded() const { return round_up(dv, gemm.cols); }
};

// One head's operands and output, in place: bf16 rows `*_stride` elements apart.
struct HeadView {
  const c10::BFloat16 *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  c10::BFloat16* out = nullptr;
  int64_t out_stride = 0;
};

// A kernel thread's float32 working set for one head, kept between calls (grown, never shrunk)
// so that no call maps fresh pages: q [Tq, D], k transposed [D, Tk'], v [Tk, Dv'], a block of
// scores [block, Tk'] and of outputs [block, Dv'] (Tk', Dv': rounded up to whole tiles, the
// padding zero).
struct HeadBuffers {
  std::vector<float> q, kt, v, scores, out;
  std::vector<uint32_t> q2, kt2, v2, p2;  // attend_head_bf16_pairs's operands: bf16 pairs
  int64_t block = 0;                      // query rows per block
};

HeadBuffers* head_buffers(const HeadShape& s) {
  thread_local HeadBuffers buffers;
  const int64_t tk_pad = s.tk_padded(), dv_pad = s.dv_padded();
  buffers.block = std::clamp<int64_t>(kScoreBlockElements / tk_pad, 1, s.tq);
  try {
    const auto fit = [](std::vector<float>& v, int64_t n) {
      if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    };
    fit(buffers.scores, buffers.block * tk_pad);
    fit(buffers.out, buffers.block * dv_pad);
    if (s.bf16_pairs) {
      const auto fit2 = [](std::vector<uint32_t>& v, int64_t n) {
        if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
      };
      const int64_t d_pairs = (s.d + 1) / 2;
      fit2(buffers.q2, s.tq * d_pairs);
      fit2(buffers.kt2, d_pairs * s.kt_stride());
      fit2(buffers.v2, tk_pad / 2 * dv_pad);
      fit2(buffers.p2, buffers.block * tk_pad / 2);
    } else {
      fit(buffers.q, s.tq * s.d);
      fit(buffers.kt, s.d * s.kt_stride());
      fit(buffers.v, s.tk * dv_pad);
    }
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return &buffers;
}

// One head: its operands widened, then per block of query rows S = Q K^T, the probabilities in
// place, O = P V over the keys the block sees, rounded into the output.
void attend_head(const HeadShape& s, const HeadView& h, HeadBuffers& buf) {
  const int64_t tk_pad = s.tk_padded(), dv_pad = s.dv_padded();
  const bool vector = s.vector;
  const Gemm gemm = s.gemm.run;
  float *qf = buf.q.data(), *kt = buf.kt.data(), *vf = buf.v.data(), *sc = buf.scores.data(), *of = buf.out.data();
  widen_bf16_rows(h.q, h.q_stride, qf, s.d, s.tq, s.d);
  const int64_t kt_ld = s.kt_stride();
  for (int64_t c = 0; c < s.d; ++c) std::fill(kt + c * kt_ld + s.tk, kt + c * kt_ld + tk_pad, 0.0f);
  widen_bf16_rows_transposed(h.k, h.k_stride, kt, kt_ld, s.tk, s.d);
  widen_bf16_rows(h.v, h.v_stride, vf, dv_pad, s.tk, s.dv);
  for (int64_t r = 0; r < s.tk; ++r) std::fill(vf + r * dv_pad + s.dv, vf + (r + 1) * dv_pad, 0.0f);
  for (int64_t r0 = 0; r0 < s.tq; r0 += buf.block) {
    const int64_t rows = std::min(buf.block, s.tq - r0);
    gemm(qf + r0 * s.d, s.d, kt, kt_ld, sc, tk_pad, rows, tk_pad, s.d);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t seen = visible_keys(r0 + r, s.tk, s.causal_offset, s.causal);
      if (vector) {
        probabilities_avx2(sc + r * tk_pad, seen, tk_pad, s.scale);
      } else {
        probabilities_scalar(sc + r * tk_pad, seen, tk_pad, s.scale);
      }
    }
    // the keys the block's last row sees (the rest are 0 in every row of the block)
    const int64_t depth = visible_keys(r0 + rows - 1, s.tk, s.causal_offset, s.causal);
    gemm(sc, tk_pad, vf, dv_pad, of, dv_pad, rows, dv_pad, depth);
    round_rows_to_bf16(of, dv_pad, h.out + r0 * h.out_stride, h.out_stride, rows, s.dv);
  }
}

// bf16 x[0..n) widened, dotted with float32 y: one float32 sum (8 lanes, then across them).
ERA_ATTN_TARGET inline __m256 widen8(const c10::BFloat16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// A decode step's query (Tq = 1) against its keys and values read where they lie (a cache slice):
// no widened copies of K and V, which for one query row cost more than the products (the general
// path transposes K into a buffer per head). Per key a dot product over D (four keys at a time,
// sharing the query's loads), the row's probabilities as in attend_head, then O = sum_j p_j v_j
// over the visible keys in float32, rounded once. A decode step of a 7B-width model on the Zen 5
// VM (32 heads of 136, about 250 keys): the TorchScript composition copied each head's K and V
// slices to contiguous memory inside bmm, 0.64 ms a layer.
ERA_ATTN_TARGET void attend_one_query(const HeadShape& s, const HeadView& h, std::vector<float>& qf, std::vector<float>& sc,
                                      std::vector<float>& acc) {
  const int64_t d = s.d, dv = s.dv, tk = s.tk, d8 = d - d % 8, dv8 = dv - dv % 8;
  qf.resize(static_cast<size_t>(d));
  sc.resize(static_cast<size_t>(tk));
  acc.resize(static_cast<size_t>(dv));
  for (int64_t c = 0; c < d; ++c) qf[c] = static_cast<float>(h.q[c]);
  const float* q = qf.data();
  float* scores = sc.data();
  const auto key = [&](int64_t j) { return h.k + j * h.k_stride; };
  int64_t j = 0;
  for (; j + 4 <= tk; j += 4) {
    const c10::BFloat16 *k0 = key(j), *k1 = key(j + 1), *k2 = key(j + 2), *k3 = key(j + 3);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d8; c += 8) {
      const __m256 qv = _mm256_loadu_ps(q + c);
      a0 = _mm256_fmadd_ps(widen8(k0 + c), qv, a0);
      a1 = _mm256_fmadd_ps(widen8(k1 + c), qv, a1);
      a2 = _mm256_fmadd_ps(widen8(k2 + c), qv, a2);
      a3 = _mm256_fmadd_ps(widen8(k3 + c), qv, a3);
    }
    float r[4] = {horizontal_sum(a0), horizontal_sum(a1), horizontal_sum(a2), horizontal_sum(a3)};
    for (int64_t c = d8; c < d; ++c) {
      r[0] += static_cast<float>(k0[c]) * q[c], r[1] += static_cast<float>(k1[c]) * q[c];
      r[2] += static_cast<float>(k2[c]) * q[c], r[3] += static_cast<float>(k3[c]) * q[c];
    }
    std::copy(r, r + 4, scores + j);
  }
  for (; j < tk; ++j) {
    const c10::BFloat16* kj = key(j);
    __m256 a = _mm256_setzero_ps();
    for (int64_t c = 0; c < d8; c += 8) a = _mm256_fmadd_ps(widen8(kj + c), _mm256_loadu_ps(q + c), a);
    float r = horizontal_sum(a);
    for (int64_t c = d8; c < d; ++c) r += static_cast<float>(kj[c]) * q[c];
    scores[j] = r;
  }
  const int64_t seen = visible_keys(0, tk, s.causal_offset, s.causal);
  probabilities_avx2(scores, seen, tk, s.scale);
  float* o = acc.data();
  std::fill(o, o + dv, 0.0f);
  for (j = 0; j < seen; ++j) {
    const float p = scores[j];
    if (p == 0.0f) continue;  // adds nothing (a key far below the row's maximum)
    const c10::BFloat16* vj = h.v + j * h.v_stride;
    const __m256 pv = _mm256_set1_ps(p);
    int64_t c = 0;
    for (; c < dv8; c += 8) _mm256_storeu_ps(o + c, _mm256_fmadd_ps(widen8(vj + c), pv, _mm256_loadu_ps(o + c)));
    for (; c < dv; ++c) o[c] += static_cast<float>(vj[c]) * p;
  }
  round_rows_to_bf16(o, dv, h.out, dv, 1, dv);
}

// attend_head with AVX512-BF16's dot products: the operands stay bf16, laid out as the pairs the
// instruction multiplies (Q's rows as pairs along D; K transposed, each column a key's pair; V and
// the probabilities paired along the keys: P is bf16-valued already, HF's rounding). Same
// products (exact) and float32 sums as the widened path, in another order; twice the multiplies
// per instruction and half the operand bytes. A CLIP-L/336 tower layer on the Zen 5 VM (2
// threads, era_bench --machine): 258 GFLOP/s widened, 399-409 here.
ERA_ATTN_BF16_TARGET void attend_head_bf16_pairs(const HeadShape& s, const HeadView& h, HeadBuffers& buf) {
  const int64_t tk_pad = s.tk_padded(), dv_pad = s.dv_padded(), kt_ld = s.kt_stride();
  const int64_t d_pairs = (s.d + 1) / 2, key_pairs = tk_pad / 2;
  uint32_t *q2 = buf.q2.data(), *kt2 = buf.kt2.data(), *v2 = buf.v2.data(), *p2 = buf.p2.data();
  float *sc = buf.scores.data(), *of = buf.out.data();
  const auto bits = [](const c10::BFloat16* row, int64_t c, int64_t n) { return c < n ? bf16_bits(row[c]) : uint16_t{0}; };
  for (int64_t t = 0; t < s.tq; ++t) {
    const c10::BFloat16* row = h.q + t * h.q_stride;
    for (int64_t i = 0; i < d_pairs; ++i) q2[t * d_pairs + i] = bf16_pair(bits(row, 2 * i, s.d), bits(row, 2 * i + 1, s.d));
  }
  for (int64_t i = 0; i < d_pairs; ++i) std::fill(kt2 + i * kt_ld + s.tk, kt2 + i * kt_ld + tk_pad, 0u);
  for (int64_t j = 0; j < s.tk; ++j) {
    const c10::BFloat16* row = h.k + j * h.k_stride;
    for (int64_t i = 0; i < d_pairs; ++i) kt2[i * kt_ld + j] = bf16_pair(bits(row, 2 * i, s.d), bits(row, 2 * i + 1, s.d));
  }
  for (int64_t i = 0; i < key_pairs; ++i) {
    const int64_t j0 = 2 * i, j1 = 2 * i + 1;
    uint32_t* out = v2 + i * dv_pad;
    for (int64_t c = 0; c < s.dv; ++c) {
      const uint16_t lo = j0 < s.tk ? bf16_bits(h.v[j0 * h.v_stride + c]) : 0,
                     hi = j1 < s.tk ? bf16_bits(h.v[j1 * h.v_stride + c]) : 0;
      out[c] = bf16_pair(lo, hi);
    }
    std::fill(out + s.dv, out + dv_pad, 0u);
  }
  for (int64_t r0 = 0; r0 < s.tq; r0 += buf.block) {
    const int64_t rows = std::min(buf.block, s.tq - r0);
    gemm_bf16_pairs(q2 + r0 * d_pairs, d_pairs, kt2, kt_ld, sc, tk_pad, rows, tk_pad, d_pairs);
    for (int64_t r = 0; r < rows; ++r) {
      float* p = sc + r * tk_pad;
      probabilities_avx2(p, visible_keys(r0 + r, s.tk, s.causal_offset, s.causal), tk_pad, s.scale);
      for (int64_t i = 0; i < key_pairs; ++i)
        p2[r * key_pairs + i] = bf16_pair(bf16_bits_of_exact(p[2 * i]), bf16_bits_of_exact(p[2 * i + 1]));
    }
    const int64_t depth = visible_keys(r0 + rows - 1, s.tk, s.causal_offset, s.causal);
    gemm_bf16_pairs(p2, key_pairs, v2, dv_pad, of, dv_pad, rows, dv_pad, (depth + 1) / 2);
    round_rows_to_bf16(of, dv_pad, h.out + r0 * h.out_stride, h.out_stride, rows, s.dv);
  }
}

}  // namespace

torch::Tensor widened_attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                          int64_t causal_offset, bool causal) {
  check_shapes(q, k, v);
  const torch::ScalarType dtype = q.scalar_type();
  torch::Tensor s =
      torch::matmul(q.to(torch::kFloat), k.to(torch::kFloat).transpose(-1, -2)).to(dtype).mul(scale).to(torch::kFloat);
  if (causal) {
    const int64_t tq = q.size(2), tk = k.size(2);
    const torch::Tensor query_pos = torch::arange(tq, torch::dtype(torch::kLong).device(q.device())).unsqueeze(1) + causal_offset;
    const torch::Tensor key_pos = torch::arange(tk, torch::dtype(torch::kLong).device(q.device())).unsqueeze(0);
    s = s.masked_fill(key_pos > query_pos, -std::numeric_limits<double>::infinity());
  }
  const torch::Tensor p = torch::softmax(s, -1).to(dtype);
  return torch::matmul(p.to(torch::kFloat), v.to(torch::kFloat)).to(dtype);
}

torch::Tensor widened_attention(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in, double scale,
                                int64_t causal_offset, bool causal) {
  check_shapes(q_in, k_in, v_in);
  if (!bf16_attention_on_cpu(q_in, k_in, v_in))
    return widened_attention_reference(q_in, k_in, v_in, scale, causal_offset, causal);
  // each head a matrix whose rows are contiguous (a transposed view or a cache slice qualifies)
  const auto rows_contiguous = [](const torch::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); };
  const torch::Tensor q = rows_contiguous(q_in), k = rows_contiguous(k_in), v = rows_contiguous(v_in);
  HeadShape shape;
  shape.tq = q.size(2);
  shape.tk = k.size(2);
  shape.d = q.size(3);
  shape.dv = v.size(3);
  shape.causal_offset = causal_offset;
  shape.causal = causal;
  // the multiplier LibTorch's `bf16 scores * scale` uses (util/compat.h)
  shape.scale = compat::kBf16TimesScalarRoundsTheScalar ? bf16_value(static_cast<float>(scale)) : static_cast<float>(scale);
  const int64_t B = q.size(0), H = q.size(1);
  // [B, Tq, H, Dv] in memory, returned as the [B, H, Tq, Dv] view
  torch::Tensor out = torch::empty({B, shape.tq, H, shape.dv}, q.options());
  if (out.numel() == 0) return out.transpose(1, 2);
  if (shape.tk == 0) return out.zero_().transpose(1, 2);
  const auto* qp = q.data_ptr<c10::BFloat16>();
  const auto* kp = k.data_ptr<c10::BFloat16>();
  const auto* vp = v.data_ptr<c10::BFloat16>();
  auto* op = out.data_ptr<c10::BFloat16>();
  std::atomic<bool> out_of_memory{false};
  // One parallel region for all heads: the threads never hand over to LibTorch's GEMM (on Debian's
  // route OpenBLAS's own threads) and back inside a call (see the header).
  // one query row (a decode step) on a CPU with AVX2: each head read in place (attend_one_query)
  const bool one_query = shape.tq == 1 && shape.vector;
  // head (b, h) of the operands and of the [B, Tq, H, Dv] output
  const auto view_of = [&](int64_t b, int64_t h) {
    HeadView view;
    view.q = qp + b * q.stride(0) + h * q.stride(1);
    view.q_stride = q.stride(2);
    view.k = kp + b * k.stride(0) + h * k.stride(1);
    view.k_stride = k.stride(2);
    view.v = vp + b * v.stride(0) + h * v.stride(1);
    view.v_stride = v.stride(2);
    view.out = op + (b * shape.tq * H + h) * shape.dv;
    view.out_stride = H * shape.dv;
    return view;
  };
  kernel_parallel_for(0, B * H, 1, [&](int64_t lo, int64_t hi) {
    if (one_query) {
      thread_local std::vector<float> qf, sc, acc;
      for (int64_t bh = lo; bh < hi; ++bh) attend_one_query(shape, view_of(bh / H, bh % H), qf, sc, acc);
      return;
    }
    HeadBuffers* buffers = head_buffers(shape);
    if (!buffers) {
      out_of_memory = true;
      return;
    }
    for (int64_t bh = lo; bh < hi; ++bh) {
      const HeadView view = view_of(bh / H, bh % H);
      if (shape.bf16_pairs) {
        attend_head_bf16_pairs(shape, view, *buffers);
      } else {
        attend_head(shape, view, *buffers);
      }
    }
  });
  TORCH_CHECK(!out_of_memory, "era::widened_attention: out of memory for the per-thread buffers of ", shape.tq, " x ", shape.tk,
              " scores");
  return out.transpose(1, 2);
}

bool attention_isa_available(AttentionIsa isa) {
  switch (isa) {
    case AttentionIsa::kAvx512Bf16: return has_avx512_bf16() && has_avx2_fma();
    case AttentionIsa::kAvx512: return has_avx512() && has_avx2_fma();
    case AttentionIsa::kAvx2: return has_avx2_fma();
    default: return true;
  }
}

void pin_attention_isa(std::optional<AttentionIsa> isa) {
  TORCH_CHECK(!isa || attention_isa_available(*isa), "era::pin_attention_isa: this CPU lacks the instruction set");
  g_pinned_isa = isa ? static_cast<int>(*isa) : -1;
}

void register_widened_attention_operator() {}  // the registrations below run when this object is linked in

// The bundle format's operator (the schema is fixed: bundles carry calls to it).
TORCH_LIBRARY_FRAGMENT(era, m) {
  m.def("widened_attention(Tensor q, Tensor k, Tensor v, float scale, int causal_offset, bool causal) -> Tensor");
}
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("widened_attention", &widened_attention); }

}  // namespace era
