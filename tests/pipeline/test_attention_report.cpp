// The attention report on constructed attention rows: the collapse a naive merge causes, and
// LAR's log-bias undoing it exactly when the merged keys were identical.
#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/attention_report.h"

namespace era {
namespace {

// A sequence [system x s][visual x v][instruction x n] (embeddings are irrelevant here).
PromptSequence layout(int64_t s, int64_t v, int64_t n) {
  PromptSequence seq;
  seq.embeds = torch::zeros({1, s + v + n, 4});
  seq.segments = {
      {SequenceSegment::Kind::kText, 0, s}, {SequenceSegment::Kind::kImage, s, v, 0}, {SequenceSegment::Kind::kText, s + v, n}};
  return seq;
}

TEST(AttentionReport, NaiveMergeCollapsesAndLogBiasRestores) {
  const auto full = layout(2, 4, 2), reduced = layout(2, 1, 2);
  // One layer, one head, all logits 0: each key gets 1/8 of the mass in the full run.
  const auto attn_full = torch::zeros({1, 1, 1, 8});
  const auto naive = torch::zeros({1, 1, 1, 5});
  auto rectified = torch::zeros({1, 1, 1, 5});
  rectified[0][0][0][2] = std::log(4.0);  // b = |C| = 4 for the merged visual key

  const auto collapsed = compare_last_query_attention(full, attn_full, reduced, naive);
  ASSERT_EQ(collapsed.layers.size(), 1u);
  const auto& c = collapsed.layers[0];
  EXPECT_NEAR(c.share_full[0], 0.25, 1e-12);
  EXPECT_NEAR(c.share_full[1], 0.5, 1e-12);
  EXPECT_NEAR(c.share_reduced[1], 0.2, 1e-12);  // 1 of 5 equal keys
  EXPECT_NEAR(c.visual_logit_deviation, -std::log(4.0), 1e-12);
  EXPECT_GT(c.group_kl, 0.05);
  EXPECT_EQ(collapsed.visual_tokens_full, 4);
  EXPECT_EQ(collapsed.visual_tokens_reduced, 1);

  const auto restored = compare_last_query_attention(full, attn_full, reduced, rectified).layers[0];
  // float32 logits: log(4) is exact to ~1e-8.
  EXPECT_NEAR(restored.share_reduced[1], 0.5, 1e-7);
  EXPECT_NEAR(restored.visual_logit_deviation, 0.0, 1e-7);
  EXPECT_NEAR(restored.group_kl, 0.0, 1e-7);
}

TEST(AttentionReport, RejectsMismatchedRows) {
  const auto full = layout(2, 4, 2), reduced = layout(2, 1, 2);
  EXPECT_ANY_THROW(compare_last_query_attention(full, torch::zeros({1, 1, 1, 7}), reduced, torch::zeros({1, 1, 1, 5})));
}

}  // namespace
}  // namespace era
