#pragma once
// Internal header. Where a bfloat16 / float16 model multiplies in float32 on the CPU.
//
// Without AVX512-BF16 / AMX (or AMX-FP16), LibTorch's reduced-precision CPU GEMM runs several
// times below its float32 rate: on the 2-core AVX2 EPYC of docs/perf/, 21 vs 134 GFLOP/s. The
// exported modules (tools/era_tools/llava_model.py: Linear and the attention cores) can widen a
// compute-bound matmul (at least `cpu_upcast_min_rows` rows: the vision tower, prefill) to float32
// per call and round the result back, which keeps the bf16 model's numerics; one-row decode steps
// stay memory-bound and read the narrow weights as stored, through era's own kernel where the CPU
// has AVX2 (model/cpu_gemv.h; the Linear's `gemv_max_rows`). This file decides whether to ask for
// them and sets those attributes on every module that has them (older bundles have none).
#include <torch/script.h>

#include <cstdint>
#include <string>

namespace era {

struct ModelBundle;

enum class CpuMatmul {
  kAuto,     // float32 where the CPU lacks arithmetic in the model's dtype
  kFloat32,  // always float32 for compute-bound matmuls of a bf16 / fp16 model
  kNative,   // the model's dtype throughout (LibTorch's kernels as they are)
};

CpuMatmul parse_cpu_matmul(const std::string& name);  // "auto", "float32", "native"; throws kInvalidArgument
std::string cpu_matmul_name(CpuMatmul mode);

// Does /proc/cpuinfo list `flag` (e.g. "avx512_bf16") for this CPU? Read once; false where unreadable.
bool cpu_has_flag(const std::string& flag);

// Does this CPU have reduced-precision arithmetic in `dtype` that makes LibTorch's GEMM faster
// than its float32 one (bf16: amx_bf16, or avx512_bf16 on an AMD CPU; fp16: amx_fp16, on
// LibTorch 2.x)? AVX512-BF16 and AVX512-FP16 alone on an Intel CPU do not: measured at 0.5-0.6x
// the float32 rate there, where on AMD's Zen 5 the bf16 GEMM ran at 4.6x. float32 always; read
// from /proc/cpuinfo once.
bool cpu_has_native_arithmetic(torch::ScalarType dtype);

// The row count from which matmuls widen to float32 for this bundle's device, dtype and mode
// (0 = never: a float32 model, a GPU, kNative, or kAuto on a CPU with native arithmetic).
int64_t cpu_upcast_min_rows(const ModelBundle& bundle, CpuMatmul mode);

// Do this CPU bundle's compute-bound products run in float32 (a float32 model, or a bf16 / fp16
// one widened: cpu_upcast_min_rows > 0), that is in LibTorch's float32 BLAS? True off the CPU
// too (nothing to change there). util/cpu_threads.h sizes the thread pools by it.
bool cpu_matmuls_in_float32(const ModelBundle& bundle, CpuMatmul mode);

// The row count up to which Linear calls era's decode kernel (model/cpu_gemv.h; 0 = never): a
// bf16 / fp16 bundle on a CPU the kernel runs on, in every mode but kNative (also where the CPU
// has bf16 arithmetic: the kernel streams the weights faster than LibTorch's bf16 GEMV there too).
int64_t cpu_gemv_max_rows(const ModelBundle& bundle, CpuMatmul mode);

// The same for the weight-only int8 linears (model/int8_linear.h): their CPU kernel reads int8
// weights whatever the model's dtype, so only the mode (kNative: LibTorch's GEMM throughout) and
// the CPU decide. On a GPU: the rows of era's CUDA kernel where era was built with it
// (int8_cuda_kernel_max_rows; the CPU mode does not apply there), else 0.
int64_t int8_gemv_max_rows(const ModelBundle& bundle, CpuMatmul mode);

// Whether this CPU and LibTorch pack bf16 weights for oneDNN at all (model/onednn_linear.h): native
// bf16 arithmetic and a LibTorch with the operators (2.x). The one statement of that condition,
// shared by the runtime below, era_bench's GEMM probe and the tests.
bool cpu_packs_bf16_for_onednn();

// Where oneDNN multiplies bf16 natively but this LibTorch cannot pack (Debian's 1.13): the tower's
// linears then run with plain weights, their rows split between the threads (model/onednn_linear.h).
bool cpu_splits_bf16_linears_by_rows();

// Whether the vision tower's and projector's linears go through era::onednn_linear, their weights
// packed (cpu_packs_bf16_for_onednn) or their rows split (cpu_splits_bf16_linears_by_rows): a bf16
// CPU bundle under kAuto. kNative keeps LibTorch's plain linear: the comparison.
bool cpu_routes_linears_to_onednn(const ModelBundle& bundle, CpuMatmul mode);

// Sets cpu_upcast_min_rows, gemv_max_rows, float32_on_cpu (the exported LayerNorm, in float32
// where compat::kBf16LayerNormRoundsPerStep, in every mode but kNative) and eager_decode (the
// exported SDPA core: a one-token step as bf16 products and a float32 softmax where the CPU has
// bf16 arithmetic, in every mode but kNative), and per_head_kernel (the exported vision attention
// cores: era::widened_attention's kernel there too, for bf16, where that arithmetic is not AMX),
// and decode_kernel (the exported decoder attention cores, math or SDPA: a one-token step that
// sees every key in era::widened_attention, which reads the KV cache in place; for bf16 wherever
// its AVX2 path runs, in every mode but kNative) on every submodule of the bundle's
// three modules that has them, and routes the vision tower's and projector's linears where
// cpu_routes_linears_to_onednn (counted in bundle.onednn_packed_linears or
// bundle.row_split_linears); returns how many modules
// had attributes set (0 for a bundle exported before either existed). Packing is one way: a
// session applies its mode once, to the bundle it just loaded.
int apply_cpu_matmul(ModelBundle& bundle, CpuMatmul mode);

}  // namespace era
