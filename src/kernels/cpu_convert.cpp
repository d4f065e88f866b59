#include "kernels/cpu_convert.h"

#include <immintrin.h>

namespace era {

namespace {

// The scalar tails: c10::BFloat16's own conversions (rounding to nearest even; a NaN becomes
// the quiet NaN 0x7FC0), which the vector loops reproduce.
inline uint16_t round_bits(float f) { return c10::BFloat16(f).x; }

inline float widen_bits(uint16_t b) { return static_cast<float>(c10::BFloat16(b, c10::BFloat16::from_bits())); }

bool has_avx2() {
  static const bool available = __builtin_cpu_supports("avx2");
  return available;
}

__attribute__((target("avx2"))) void widen_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) dst[i] = widen_bits(src[i]);
}

__attribute__((target("avx2"))) inline __m256i round8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
}

__attribute__((target("avx2"))) void round_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(src + i), b = _mm256_loadu_ps(src + i + 8);
    // packus interleaves the two 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7]; the permute restores order
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(round8(a), round8(b)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = round_bits(src[i]);
}

void widen_run(const uint16_t* src, float* dst, int64_t n) {
  if (has_avx2()) return widen_avx2(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = widen_bits(src[i]);
}

void round_run(const float* src, uint16_t* dst, int64_t n) {
  if (has_avx2()) return round_avx2(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = round_bits(src[i]);
}

}  // namespace

void widen_bf16_rows(const c10::BFloat16* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t cols) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t r = 0; r < rows; ++r) widen_run(s + r * src_stride, dst + r * dst_stride, cols);
}

void round_rows_to_bf16(const float* src, int64_t src_stride, c10::BFloat16* dst, int64_t dst_stride, int64_t rows,
                        int64_t cols) {
  auto* d = reinterpret_cast<uint16_t*>(dst);
  for (int64_t r = 0; r < rows; ++r) round_run(src + r * src_stride, d + r * dst_stride, cols);
}

void widen_bf16_rows_transposed(const c10::BFloat16* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows,
                                int64_t cols) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = widen_bits(s[r * src_stride + c]);
  }
}

}  // namespace era
