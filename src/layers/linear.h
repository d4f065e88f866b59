#pragma once
// Internal header. A linear layer as era's native models call it: the routing the exported
// TorchScript Linear does per call (tools/era_tools/llava_model.py, Linear), decided once at load
// by the runtime (model/cpu_matmul.h) and applied here without a graph in between.
#include <torch/torch.h>

#include <cstdint>

namespace era::layers {

// Where a call's rows go. Both 0 (as exported): LibTorch's linear throughout.
struct LinearRouting {
  // Calls of 1..gemv_max_rows rows (decode steps): era's memory-bound kernel (kernels/cpu_gemv.h).
  int64_t gemv_max_rows = 0;
  // Calls of at least this many rows with bf16 / fp16 inputs on the CPU: products in float32,
  // rounded once (kernels/cpu_widened_linear.h). 0 = never.
  int64_t upcast_min_rows = 0;
  // Every call beyond gemv_max_rows through era::onednn_linear (kernels/onednn_linear.h: plain bf16
  // weights with their rows split between the threads), as the exported vision linears run where
  // the runtime routes them there (model/cpu_matmul.h, cpu_routes_linears_to_onednn).
  bool onednn = false;
};

// Does a call over `x` with `rows` rows widen to float32 under `min_rows` (the exported cpu_upcast)?
bool widens(const torch::Tensor& x, int64_t rows, int64_t min_rows);

// a @ b in a's dtype; `widened`: computed in float32 and rounded once to a's dtype (the exported
// matmul_f32 of the attention cores).
torch::Tensor matmul_f32(const torch::Tensor& a, const torch::Tensor& b, bool widened);

// y = x W^T + b for x [..., K], weight [N, K], bias [N] (undefined: none), routed as above.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const LinearRouting& routing);

}  // namespace era::layers
