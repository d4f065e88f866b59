#pragma once
// Internal header. LAR's rectified attention as one operator: softmax(Q K^T / sqrt(d) + log b_key
// + causal) V, where b_key is the BTR bias of each recycled key (1 for every other key).
//
// Two forms of the same maths (era::LarPath), both over the decoder's KV cache, whose rows are
// the augmented K~ = [K, sqrt(d) log b, 0..] and V~ = [V, 0..] (cache_head_dim wide; model/kv_cache.h):
//   - augmented: Q~ = [Q, 1, 0..] against K~, V~ as stored: one SDPA call whose key dimension
//     carries the bias, the scale passed explicitly (1/sqrt(d), not of the wider width);
//   - additive mask: plain width-d Q, K, V and the bias channel as a float mask.
// Three kernel paths, each what the exported TorchScript cores ran (llava_model.py, MathAttention
// and SdpaAttention): HF's eager composition ("math"), LibTorch's fused SDPA (LibTorch >= 2.1),
// and era's CPU kernel for bf16 (kernels/cpu_widened_attention.h) for decode steps and widened
// prefill.
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace era::layers {

enum class AttentionKernel { kMath, kSdpa };

// "math" / "sdpa" (the bundle's exported_with.attention); throws kInvalidArgument naming the value,
// and for "sdpa" on a LibTorch without it.
AttentionKernel parse_attention_kernel(const std::string& name);

// What the runtime decided for this device and dtype (model/cpu_matmul.h), as it sets it on the
// exported cores.
struct AttentionRouting {
  int64_t upcast_min_rows = 0;  // queries from which a bf16 / fp16 call widens to float32
  bool decode_kernel = false;   // a one-query step that sees every key: era::widened_attention
  bool eager_decode = false;    // SDPA core: a one-query step as bf16 products + float32 softmax
};

// [tq, tk] bool, true where key j is in the future of query t (j > offset + t).
torch::Tensor hidden_keys(int64_t tq, int64_t tk, int64_t offset, const torch::Device& device);

// q [B, H, Tq, w], k / v [B, H, Tk, w] (GQA heads already repeated) -> [B, H, Tq, w]; query t sees
// keys 0 .. causal_offset + t. `scale` multiplies Q K^T (1/sqrt(head_dim) also for the augmented width).
torch::Tensor attend(AttentionKernel kernel, const AttentionRouting& routing, const torch::Tensor& q,
                     const torch::Tensor& k, const torch::Tensor& v, double scale, int64_t causal_offset);

// The additive-mask form: plain q / k / v and key_bias [B, Tk] (float32, log b per key) added to
// the scaled logits.
torch::Tensor attend_with_bias(AttentionKernel kernel, const AttentionRouting& routing, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& key_bias,
                               double scale, int64_t causal_offset);

}  // namespace era::layers
