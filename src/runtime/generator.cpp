#include "runtime/generator.h"

#include <chrono>

#include "util/stage_scope.h"
#include "util/stopwatch.h"

namespace era {
namespace {

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence or with the
// replacement character SentencePiece emits for an incomplete byte-fallback sequence.
size_t complete_utf8_prefix(const std::string& s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  size_t n = s.size();
  if (n >= 3 && s.compare(n - 3, 3, kReplacement) == 0) return n - 3;
  size_t i = n;
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;  // continuation bytes
  if (i == 0) return n;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return (n - (i - 1) >= need) ? n : i - 1;
}

}  // namespace

GenerationOutput Generator::run(const PromptSequence& sequence, const GenerationLimits& limits, Sampler& sampler, KvCache& cache,
                                const TextCallback& on_text) {
  GenerationOutput out;
  out.finish_reason = "length";
  if (limits.max_new_tokens <= 0) return out;

  Stopwatch clock;
  torch::Tensor logits;
  int64_t next = 0;
  {
    ERA_STAGE_SCOPE("prefill");
    if (pruning_ != nullptr) {
      PrunedPrefill pruned = prefill_pruned(decoder_, sequence, *pruning_, cache, lar_);
      logits = pruned.logits;
      out.kept_in_span = std::move(pruned.kept_in_span);
      out.pruned_visual_tokens = pruned.visual_tokens;
    } else {
      logits = decoder_.forward(sequence.embeds, sequence.positions, sequence.key_log_bias, cache, /*last_only=*/true, lar_);
    }
    next = sampler.next(logits[0][-1]);
  }
  out.prefill_ms = clock.elapsed_ms();

  size_t emitted = 0;  // bytes of decoded text already streamed
  int64_t position = sequence.next_position();
  const auto zero_bias = torch::zeros({1, 1}, torch::kFloat);
  while (true) {
    if (limits.stop_at_eos && is_stop_token(stop_ids_, next)) {
      out.finish_reason = "eos";
      break;
    }
    out.tokens.push_back(next);
    if (on_text) {
      // Re-decoding the whole answer keeps SentencePiece's spacing rules intact; a character
      // still cut between byte-level tokens stays raw and is held back below.
      const std::string text = tokenizer_.decode_growing(out.tokens);
      const size_t complete = complete_utf8_prefix(text);
      if (complete > emitted) {
        if (!on_text(text.substr(emitted, complete - emitted))) {
          out.finish_reason = "cancelled";
          break;
        }
        emitted = complete;
      }
    }
    if (static_cast<int64_t>(out.tokens.size()) >= limits.max_new_tokens) break;

    clock.restart();
    ERA_STAGE_SCOPE("decode");
    const auto embed = decoder_.embed(torch::full({1, 1}, next, torch::kLong));
    if (pruning_ != nullptr) {  // the original RoPE position, even though layers >= K hold fewer slots
      logits = decode_pruned(decoder_, embed, position, pruning_->pruner->layer(), cache, lar_);
    } else {
      logits = decoder_.forward(embed, torch::full({1, 1}, position, torch::kLong), zero_bias, cache, /*last_only=*/true, lar_);
    }
    next = sampler.next(logits[0][-1]);
    out.decode_ms.push_back(clock.elapsed_ms());
    ++position;
  }
  out.text = tokenizer_.decode(out.tokens);
  if (on_text && out.finish_reason != "cancelled" && out.text.size() > emitted) on_text(out.text.substr(emitted));
  return out;
}

}  // namespace era
