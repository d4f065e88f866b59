#pragma once
// Internal (era_bench --machine): the two limits a CPU run is measured against, taken on this
// machine with LibTorch's own kernels at the configured thread count:
// - the GEMM peak per dtype: torch::linear (the decoder's and the tower's matmul) on a prefill-like
//   shape, best of repeated runs;
// - the memory bandwidth: a read (sum of a tensor far larger than the caches), a copy, and the
//   decode-like matrix-vector product (one token through a 4096 x 11008 weight), whose bytes per
//   second are what a decode step can reach;
// and, to name where a VM's vCPUs sit, the latency between the first two CPUs (bench/core_latency.h).
#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

namespace era::bench {

struct GemmRate {
  std::string dtype;
  int64_t m = 0, k = 0, n = 0;
  double gflops = 0;  // best run
};

// One layer of the vision tower's attention in bf16 (CLIP-L/336: 16 heads of 577 tokens x 64),
// products widened to float32 as sessions run it on CPUs without bf16 arithmetic: LibTorch's
// operators composed as the TorchScript cores used to ("bf16-ops"), and era's per-head kernel
// (model/cpu_widened_attention.h, "era-bf16"). FLOPs: the two products.
struct AttentionRate {
  std::string path;
  int64_t heads = 0, tokens = 0, head_dim = 0;
  double gflops = 0;  // best run
};

struct MachineLimits {
  int threads = 0;
  int kernel_threads = 0;        // era's decode kernel's (the era-bf16 / era-int8 rows)
  std::string openblas_core;     // where LibTorch multiplies in OpenBLAS: its kernel set ("" with MKL)
  std::vector<GemmRate> gemm;    // prefill-like products per dtype
  std::vector<GemmRate> gemv;    // one-row products per dtype (gflops), see gemv_gbs
  std::vector<double> gemv_gbs;  // their weight bytes per second
  std::vector<AttentionRate> attention;
  double read_gbs = 0, copy_gbs = 0;  // copy counts bytes read + written
  double core_to_core_ns = 0;         // bench/core_latency.h; 0 with fewer than two CPUs
};

// About `seconds` of measurement in all, on `threads` intra-op threads (0: what a Session uses,
// util/cpu_threads.h). The GEMM rows include bf16 widened to float32 per call ("bf16>f32", the
// --cpu-matmul float32 path, widening included) and, where sessions pack bf16 weights for oneDNN,
// the product with a packed weight ("bf16-pack").
MachineLimits measure_machine(int threads, double seconds = 8.0);

std::string format_machine(const MachineLimits& m);

// measure_machine's prefill-like GEMM (torch::linear, 512 x 4096 x 4096) in one dtype, kept to be
// timed again and again: era_bench --vs-machine times it before each timed request, so that each
// request's FLOP rate is compared with the machine's rate of the same minute (a shared VM's speed
// moves by up to 2x between minutes). On the threads LibTorch has when it is timed. Where a
// session packs bf16 weights for oneDNN (model/onednn_linear.h: bf16 on a CPU with bf16
// arithmetic, LibTorch 2.x), the probe also times the product with its weight packed so: the
// machine's rate is that of the faster kernel.
class GemmProbe {
 public:
  explicit GemmProbe(torch::ScalarType dtype);
  // The best of repeated products for about `seconds`; with a packed weight, half the time each
  // way and the faster of the two.
  double gflops(double seconds) const;
  double plain_gflops(double seconds) const;   // LibTorch's plain linear only
  double packed_gflops(double seconds) const;  // the packed product only; 0 without one
  bool packs() const { return packed_.defined(); }
  torch::ScalarType dtype() const { return x_.scalar_type(); }
  static constexpr int64_t kM = 512, kK = 4096, kN = 4096;

 private:
  torch::Tensor x_, w_, packed_;
};

// measure_machine's memory read (the sum of a 1 GiB tensor, far beyond any cache), kept to be
// timed again and again as GemmProbe is: era_bench --vs-machine gives each request's decode
// (weight bytes per token over time) as a share of the read rate of the same minute. Holds 1 GiB.
class ReadProbe {
 public:
  ReadProbe();
  double gbs(double seconds) const;  // the best of repeated reads for about `seconds`
  static constexpr int64_t kBytes = int64_t{1} << 30;

 private:
  torch::Tensor data_;
};

}  // namespace era::bench
