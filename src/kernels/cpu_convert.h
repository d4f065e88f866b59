#pragma once
// Internal header. bfloat16 <-> float32 conversions of rows of values, on the calling thread,
// with AVX2 where the CPU has it: the building blocks of era's own kernels that work on float32
// copies of bf16 tensors (model/cpu_widened_attention.h converts one head at a time on each
// kernel thread, where LibTorch's copy_ would run on its own threads, or on one).
//
// The results are LibTorch's bit for bit: widening is exact, and rounding is to nearest even as
// c10::BFloat16 rounds (a NaN stays a NaN; its payload may differ).
#include <c10/util/BFloat16.h>

#include <cstdint>

namespace era {

// rows x cols bfloat16 values, rows `src_stride` elements apart, into `dst` (rows x cols float32,
// rows `dst_stride` apart).
void widen_bf16_rows(const c10::BFloat16* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t cols);

// The same the other way: float32 rounded to nearest even.
void round_rows_to_bf16(const float* src, int64_t src_stride, c10::BFloat16* dst, int64_t dst_stride, int64_t rows, int64_t cols);

// rows x cols bfloat16 values (rows `src_stride` apart) widened into `dst` transposed: value
// (r, c) lands at dst[c * dst_stride + r].
void widen_bf16_rows_transposed(const c10::BFloat16* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows,
                                int64_t cols);

}  // namespace era
