#include "layers/llama_decoder.h"

#include <cmath>

#include "era/error.h"
#include "layers/rms_norm.h"
#include "layers/rope.h"

namespace era::layers {

LlamaDecoder::LlamaDecoder(DecoderConfig config, DecoderWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  if (static_cast<int64_t>(weights_.layers.size()) != config_.num_layers)
    throw Error(ErrorCode::kBundle, "native decoder: " + std::to_string(weights_.layers.size()) +
                                        " layers of weights for a config of " + std::to_string(config_.num_layers));
  if (config_.num_kv_heads <= 0 || config_.num_heads % config_.num_kv_heads != 0)
    throw Error(ErrorCode::kBundle, "native decoder: num_heads " + std::to_string(config_.num_heads) +
                                        " is not a multiple of num_kv_heads " + std::to_string(config_.num_kv_heads));
}

torch::Tensor LlamaDecoder::embed(const torch::Tensor& ids) const {
  return torch::embedding(weights_.embed, ids.to(weights_.embed.device(), torch::kLong));
}

torch::Tensor LlamaDecoder::mlp(const DecoderLayerWeights& w, const torch::Tensor& x) const {
  const auto& r = routing_.linear;
  return linear(torch::silu(linear(x, w.gate, {}, r)) * linear(x, w.up, {}, r), w.down, {}, r);
}

std::pair<torch::Tensor, torch::Tensor> LlamaDecoder::attention(const DecoderLayerWeights& w, const torch::Tensor& x,
                                                                const torch::Tensor& cos, const torch::Tensor& sin,
                                                                int64_t cache_pos, const torch::Tensor& key_bias,
                                                                const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                                                bool lar_mask, bool need_attention) const {
  const int64_t B = x.size(0), T = x.size(1), d = config_.head_dim, H = config_.num_heads, Hkv = config_.num_kv_heads;
  const int64_t width = config_.cache_head_dim, n_rep = H / Hkv;
  const double sqrt_d = std::sqrt(static_cast<double>(d)), scale = 1.0 / sqrt_d;
  const auto& r = routing_.linear;
  torch::Tensor q = linear(x, w.q, w.q_bias, r).view({B, T, H, d}).transpose(1, 2);
  torch::Tensor k = linear(x, w.k, w.k_bias, r).view({B, T, Hkv, d}).transpose(1, 2);
  const torch::Tensor v = linear(x, w.v, w.v_bias, r).view({B, T, Hkv, d}).transpose(1, 2);
  q = apply_rope(q, cos, sin);
  k = apply_rope(k, cos, sin);

  // K~ = [K, sqrt(d) log b, 0..], V~ = [V, 0..]: the bias lives in the cache with its key
  const torch::Tensor k_slots = k_cache.narrow(2, cache_pos, T), v_slots = v_cache.narrow(2, cache_pos, T);
  k_slots.narrow(-1, 0, d).copy_(k);
  k_slots.narrow(-1, d, 1).copy_((key_bias * sqrt_d).to(k.scalar_type()).view({B, 1, T, 1}).expand({B, Hkv, T, 1}));
  v_slots.narrow(-1, 0, d).copy_(v);
  if (width > d + 1) k_slots.narrow(-1, d + 1, width - d - 1).zero_();
  v_slots.narrow(-1, d, width - d).zero_();

  const int64_t tk = cache_pos + T;
  torch::Tensor keys = k_cache.narrow(2, 0, tk), values = v_cache.narrow(2, 0, tk), query, mask_bias;
  if (!lar_mask) {  // Q~ = [Q, 1, 0..]
    query = torch::cat({q, torch::ones_like(q.narrow(-1, 0, 1))}, -1);
    query = torch::constant_pad_nd(query, {0, width - d - 1});
  } else {  // plain width-d Q, K, V; the cache's bias channel as the mask
    query = q;
    mask_bias = keys.select(1, 0).select(-1, d).to(torch::kFloat) / sqrt_d;  // [B, Tk]
    keys = keys.narrow(-1, 0, d);
    values = values.narrow(-1, 0, d);
  }
  if (n_rep > 1) {  // GQA: kv head j serves query heads j*n_rep .. (j+1)*n_rep-1 (HF)
    keys = keys.repeat_interleave(n_rep, 1);
    values = values.repeat_interleave(n_rep, 1);
  }
  torch::Tensor out = lar_mask ? attend_with_bias(config_.attention, routing_.attention, query, keys, values, mask_bias,
                                                  scale, cache_pos)
                               : attend(config_.attention, routing_.attention, query, keys, values, scale, cache_pos);
  torch::Tensor attn;
  if (need_attention) {  // the last query sees every key: its row is what the softmax gets
    attn = (torch::matmul(query.narrow(2, T - 1, 1), keys.transpose(-1, -2)) * scale).to(torch::kFloat).squeeze(2);
    if (lar_mask) attn = attn + mask_bias.unsqueeze(1);
  }
  out = out.narrow(-1, 0, d).transpose(1, 2).reshape({B, T, -1});
  return {linear(out, w.o, {}, r), attn};
}

std::pair<torch::Tensor, torch::Tensor> LlamaDecoder::run_range(const torch::Tensor& x_in, const torch::Tensor& positions,
                                                                int64_t cache_pos, const torch::Tensor& key_log_bias,
                                                                const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                                                const torch::Tensor& layer_scale, bool lar_mask,
                                                                int64_t begin, int64_t end, bool need_attention) const {
  if (begin < 0 || end > config_.num_layers || begin > end)
    throw Error(ErrorCode::kInvalidArgument, "native decoder: run_range needs 0 <= begin <= end <= num_layers");
  const auto [cos, sin] = rope_cos_sin(positions, config_.head_dim, config_.rope_theta, x_in.scalar_type(),
                                       config_.mrope_section);
  const torch::Tensor scales = layer_scale.to(torch::kFloat);
  const torch::Tensor log_bias = key_log_bias.to(torch::kFloat);
  torch::Tensor x = x_in;
  std::vector<torch::Tensor> attns;
  for (int64_t i = begin; i < end; ++i) {
    const DecoderLayerWeights& w = weights_.layers[static_cast<size_t>(i)];
    auto [h, a] = attention(w, rms_norm(x, w.input_norm, config_.rms_norm_eps), cos, sin, cache_pos,
                            log_bias * scales[i], k_cache[i], v_cache[i], lar_mask, need_attention);
    x = x + h;
    x = x + mlp(w, rms_norm(x, w.post_norm, config_.rms_norm_eps));
    if (need_attention) attns.push_back(a);
  }
  if (need_attention && !attns.empty()) return {x, torch::stack(attns, 0)};
  return {x, torch::Tensor()};
}

torch::Tensor LlamaDecoder::final_norm(const torch::Tensor& x) const {
  return rms_norm(x, weights_.norm, config_.rms_norm_eps);
}

torch::Tensor LlamaDecoder::logits(const torch::Tensor& x, bool last_only) const {
  const torch::Tensor h = last_only ? x.narrow(1, x.size(1) - 1, 1) : x;
  return linear(final_norm(h), weights_.lm_head, {}, routing_.linear).to(torch::kFloat);
}

}  // namespace era::layers
