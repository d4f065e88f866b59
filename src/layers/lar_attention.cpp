#include "layers/lar_attention.h"

#include <limits>

#include "era/error.h"
#include "kernels/cpu_widened_attention.h"
#include "layers/linear.h"
#include "util/compat.h"

namespace era::layers {
namespace {

// LAR's additive mask: key_bias [B, Tk] -> [B, 1, 1, Tk] (one query that sees every key) or
// [B, 1, Tq, Tk] with -inf on the hidden keys.
torch::Tensor additive_mask(const torch::Tensor& key_bias, int64_t tq, int64_t tk, int64_t offset) {
  torch::Tensor mask = key_bias.to(torch::kFloat).unsqueeze(1).unsqueeze(1);
  if (tq > 1 || offset + tq < tk) {
    const torch::Tensor causal =
        torch::zeros({tq, tk}, torch::TensorOptions().device(key_bias.device()))
            .masked_fill(hidden_keys(tq, tk, offset, key_bias.device()), -std::numeric_limits<float>::infinity());
    mask = mask + causal;
  }
  return mask;
}

bool sees_every_key(int64_t tq, int64_t tk, int64_t offset) { return tq == 1 && offset + 1 >= tk; }

torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& mask, bool causal,
                   double scale) {
#if ERA_TORCH_AT_LEAST(2, 1)
  const c10::optional<torch::Tensor> m = mask.defined() ? c10::optional<torch::Tensor>(mask) : c10::nullopt;
  return at::scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)causal, (void)scale;
  throw Error(ErrorCode::kInvalidArgument, "attention 'sdpa' needs LibTorch >= 2.1");
#endif
}

// SDPA without a mask where it can (so the fused kernels stay eligible): a single query seeing
// every key, or a whole causal prefill.
torch::Tensor sdpa_causal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale, int64_t offset) {
  const int64_t tq = q.size(2), tk = k.size(2);
  if (sees_every_key(tq, tk, offset)) return sdpa(q, k, v, {}, false, scale);
  if (offset == 0 && tq == tk) return sdpa(q, k, v, {}, true, scale);
  return sdpa(q, k, v, torch::logical_not(hidden_keys(tq, tk, offset, q.device())), false, scale);
}

}  // namespace

AttentionKernel parse_attention_kernel(const std::string& name) {
  if (name == "math" || name == "explicit") return AttentionKernel::kMath;
  if (name == "sdpa") {
    if (!compat::kHasSdpa)
      throw Error(ErrorCode::kInvalidArgument, "attention 'sdpa' needs LibTorch >= 2.1 (this build has " +
                                                   std::to_string(compat::kLibTorchMajor) + "." +
                                                   std::to_string(compat::kLibTorchMinor) + ")");
    return AttentionKernel::kSdpa;
  }
  throw Error(ErrorCode::kInvalidArgument, "attention '" + name + "' is not one of math, sdpa");
}

torch::Tensor hidden_keys(int64_t tq, int64_t tk, int64_t offset, const torch::Device& device) {
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  const torch::Tensor q_pos = torch::arange(tq, opts).unsqueeze(1) + offset;
  const torch::Tensor k_pos = torch::arange(tk, opts).unsqueeze(0);
  return k_pos > q_pos;
}

torch::Tensor attend(AttentionKernel kernel, const AttentionRouting& routing, const torch::Tensor& q, const torch::Tensor& k,
                     const torch::Tensor& v, double scale, int64_t offset) {
  const int64_t tq = q.size(2), tk = k.size(2);
  if (routing.decode_kernel && sees_every_key(tq, tk, offset)) return widened_attention(q, k, v, scale, offset, false);
  const bool up = widens(q, tq, routing.upcast_min_rows);
  if (kernel == AttentionKernel::kMath) {
    if (up) return widened_attention(q, k, v, scale, offset, true);
    torch::Tensor scores = (torch::matmul(q, k.transpose(-1, -2)) * scale).to(torch::kFloat);
    if (tq > 1 || offset + tq < tk)
      scores = scores.masked_fill(hidden_keys(tq, tk, offset, q.device()), -std::numeric_limits<float>::infinity());
    return torch::matmul(torch::softmax(scores, -1).to(v.scalar_type()), v);
  }
  if (up) return sdpa_causal(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), scale, offset).to(q.scalar_type());
  if (routing.eager_decode && sees_every_key(tq, tk, offset)) {
    const torch::Tensor scores = (torch::matmul(q, k.transpose(-1, -2)) * scale).to(torch::kFloat);
    return torch::matmul(torch::softmax(scores, -1).to(v.scalar_type()), v);
  }
  return sdpa_causal(q, k, v, scale, offset);
}

torch::Tensor attend_with_bias(AttentionKernel kernel, const AttentionRouting& routing, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& key_bias, double scale,
                               int64_t offset) {
  const int64_t tq = q.size(2), tk = k.size(2);
  const bool up = widens(q, tq, routing.upcast_min_rows);
  const torch::Tensor mask = additive_mask(key_bias, tq, tk, offset);
  if (kernel == AttentionKernel::kMath) {
    const torch::Tensor scores = (matmul_f32(q, k.transpose(-1, -2), up) * scale).to(torch::kFloat) + mask;
    return matmul_f32(torch::softmax(scores, -1).to(v.scalar_type()), v, up);
  }
  if (up) return sdpa(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), mask, false, scale).to(q.scalar_type());
  return sdpa(q, k, v, mask.to(q.scalar_type()), false, scale);
}

}  // namespace era::layers
