#include "runtime/batch_generator.h"

#include <algorithm>
#include <chrono>

#include "era/error.h"
#include "util/stopwatch.h"

namespace era {
namespace {}  // namespace

std::vector<GenerationOutput> BatchGenerator::run(const std::vector<PromptSequence>& sequences,
                                                  const std::vector<GenerationLimits>& limits, std::vector<Sampler>& samplers,
                                                  int64_t* kv_bytes_used, int64_t* kv_bytes_allocated) {
  const int64_t b = static_cast<int64_t>(sequences.size());
  if (b == 0) return {};
  if (static_cast<int64_t>(limits.size()) != b || static_cast<int64_t>(samplers.size()) != b) {
    throw Error(ErrorCode::kInvalidArgument, "batch generation: one limit and one sampler per sequence");
  }
  int64_t longest = 0, most_new = 0;
  for (int64_t i = 0; i < b; ++i) {
    longest = std::max(longest, sequences[i].length());
    most_new = std::max(most_new, limits[i].max_new_tokens);
  }
  std::vector<GenerationOutput> out(static_cast<size_t>(b));
  for (auto& o : out) o.finish_reason = "length";
  if (most_new <= 0) return out;

  // Left padding: row i's real tokens end at slot `longest - 1`, like every other row's.
  const auto& first = sequences.front().embeds;
  auto embeds = torch::zeros({b, longest, first.size(2)}, first.options());
  // [b, longest] or, under multimodal RoPE, [b, longest, 3]
  std::vector<int64_t> position_shape = sequences.front().positions.sizes().vec();
  position_shape[0] = b;
  position_shape[1] = longest;
  auto positions = torch::zeros(position_shape, torch::kLong);
  auto bias = torch::full({b, longest}, kPaddingLogBias, torch::kFloat);
  for (int64_t i = 0; i < b; ++i) {
    const auto& s = sequences[i];
    const int64_t pad = longest - s.length();
    embeds[i].slice(0, pad, longest).copy_(s.embeds[0]);
    positions[i].slice(0, pad, longest).copy_(s.positions[0]);
    bias[i].slice(0, pad, longest).copy_(s.key_log_bias[0]);
  }
  KvCache cache = decoder_.make_cache(b, longest + most_new - 1);

  Stopwatch clock;
  auto logits = decoder_.forward(embeds, positions, bias, cache, /*last_only=*/true, lar_);
  std::vector<int64_t> next(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) next[i] = samplers[i].next(logits[i][-1]);
  const double prefill_ms = clock.elapsed_ms();

  std::vector<int64_t> first_position;  // of each row's first generated token
  for (const auto& s : sequences) first_position.push_back(s.next_position());
  std::vector<char> done(static_cast<size_t>(b), 0);
  std::vector<double> decode_ms;
  const auto zero_bias = torch::zeros({b, 1}, torch::kFloat);
  for (int64_t step = 0;; ++step) {
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      if (done[i]) continue;
      if (limits[i].stop_at_eos && is_stop_token(stop_ids_, next[i])) {
        out[i].finish_reason = "eos";
        done[i] = 1;
        continue;
      }
      out[i].tokens.push_back(next[i]);
      if (static_cast<int64_t>(out[i].tokens.size()) >= limits[i].max_new_tokens) done[i] = 1;
      all_done = all_done && done[i];
    }
    if (all_done) break;
    // Finished rows keep stepping with their last token; their outputs are ignored.
    clock.restart();
    auto pos = torch::empty({b, 1}, torch::kLong);
    for (int64_t i = 0; i < b; ++i) pos[i][0] = first_position[static_cast<size_t>(i)] + step;
    const auto embed = decoder_.embed(torch::tensor(next, torch::kLong).unsqueeze(1));
    logits = decoder_.forward(embed, pos, zero_bias, cache, /*last_only=*/true, lar_);
    for (int64_t i = 0; i < b; ++i) {
      if (!done[i]) next[i] = samplers[i].next(logits[i][-1]);
    }
    decode_ms.push_back(clock.elapsed_ms());
  }
  for (auto& o : out) {
    o.text = tokenizer_.decode(o.tokens);
    o.prefill_ms = prefill_ms;
    o.decode_ms = decode_ms;
  }
  if (kv_bytes_used) *kv_bytes_used = cache.bytes_used();
  if (kv_bytes_allocated) *kv_bytes_allocated = cache.bytes_allocated();
  return out;
}

}  // namespace era
