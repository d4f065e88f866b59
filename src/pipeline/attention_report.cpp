#include "pipeline/attention_report.h"

#include "era/error.h"

namespace era {
namespace {

enum Group : int64_t { kSystem = 0, kVisual = 1, kInstruction = 2 };

// Group of every key position: text before the first image is "system", image tokens are
// "visual", any other text is "instruction".
torch::Tensor key_groups(const PromptSequence& seq) {
  auto groups = torch::full({seq.length()}, static_cast<int64_t>(kInstruction), torch::kLong);
  int64_t first_image = seq.length();
  for (const auto& s : seq.segments) {
    if (s.kind == SequenceSegment::Kind::kImage) {
      groups.slice(0, s.start, s.start + s.length).fill_(static_cast<int64_t>(kVisual));
      first_image = std::min(first_image, s.start);
    }
  }
  groups.slice(0, 0, first_image).fill_(static_cast<int64_t>(kSystem));
  return groups;
}

// [H, Tk] logits -> [H, 3] attention mass per group, and [H] log-sum-exp of the visual logits.
std::pair<torch::Tensor, torch::Tensor> group_stats(const torch::Tensor& logits, const torch::Tensor& groups) {
  const auto l = logits.to(torch::kCPU, torch::kDouble);
  const auto probs = torch::softmax(l, -1);
  auto mass = torch::zeros({l.size(0), 3}, torch::kDouble);
  mass.index_add_(1, groups, probs);
  const auto visual = groups == static_cast<int64_t>(kVisual);
  const auto lse = torch::logsumexp(l.masked_fill(~visual, -std::numeric_limits<double>::infinity()), -1);
  return {mass, lse};
}

}  // namespace

AttentionReport compare_last_query_attention(const PromptSequence& full, const torch::Tensor& attn_full,
                                             const PromptSequence& reduced, const torch::Tensor& attn_reduced) {
  if (attn_full.dim() != 4 || attn_reduced.dim() != 4 || attn_full.size(0) != attn_reduced.size(0) ||
      attn_full.size(3) != full.length() || attn_reduced.size(3) != reduced.length()) {
    throw Error(ErrorCode::kRuntime, "attention report: attention rows do not match their sequences");
  }
  const auto groups_full = key_groups(full), groups_reduced = key_groups(reduced);
  AttentionReport report;
  report.visual_tokens_full = full.visual_tokens();
  report.visual_tokens_reduced = reduced.visual_tokens();
  for (int64_t layer = 0; layer < attn_full.size(0); ++layer) {
    const auto [mass_f, lse_f] = group_stats(attn_full[layer][0], groups_full);
    const auto [mass_r, lse_r] = group_stats(attn_reduced[layer][0], groups_reduced);
    LayerAttention la;
    const auto share_f = mass_f.mean(0), share_r = mass_r.mean(0);
    for (int g = 0; g < 3; ++g) {
      la.share_full[g] = share_f[g].item<double>();
      la.share_reduced[g] = share_r[g].item<double>();
    }
    la.visual_logit_deviation = (lse_r - lse_f).mean().item<double>();
    const double eps = 1e-12;
    la.group_kl = (mass_f * ((mass_f + eps).log() - (mass_r + eps).log())).sum(-1).mean().item<double>();
    report.layers.push_back(la);
  }
  return report;
}

}  // namespace era
