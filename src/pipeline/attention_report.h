#pragma once
// The paper's attention measurements (Attention Logit Collapse, LAR verification): how the last
// prompt token's attention splits between system text, image tokens and the instruction, in a
// reduced run against the unreduced run of the same request.
#include <torch/script.h>

#include "era/era.h"
#include "runtime/sequence.h"

namespace era {

// `attn_*`: [L, 1, H, Tk] last-query attention logits (scaled, LAR bias included) of each run, as
// Decoder::forward_with_attention returns them; the sequences give each key's group.
AttentionReport compare_last_query_attention(const PromptSequence& full, const torch::Tensor& attn_full,
                                             const PromptSequence& reduced, const torch::Tensor& attn_reduced);

}  // namespace era
