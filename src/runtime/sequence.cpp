#include "runtime/sequence.h"

#include <algorithm>

#include "era/error.h"

namespace era {

int64_t PromptSequence::visual_tokens() const {
  int64_t n = 0;
  for (const auto& s : segments) n += s.kind == SequenceSegment::Kind::kImage ? s.length : 0;
  return n;
}

int64_t PromptSequence::next_position() const {
  if (!positions.defined() || positions.numel() == 0) return length();
  return positions.max().item<int64_t>() + 1;
}

PromptSequence build_sequence(Decoder& decoder, const std::vector<int64_t>& ids, int64_t image_token_id, int64_t video_token_id,
                              const std::vector<ReducedTokens>& items) {
  const auto is_placeholder = [&](int64_t id) { return id == image_token_id || (video_token_id >= 0 && id == video_token_id); };
  const auto n_placeholders = std::count_if(ids.begin(), ids.end(), is_placeholder);
  if (n_placeholders != static_cast<int64_t>(items.size())) {
    throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(n_placeholders) + " image/video placeholder(s) but " +
                                        std::to_string(items.size()) + " image(s) and video(s) were given");
  }
  const std::vector<ReducedTokens>& images = items;
  // One embedding call for all text: the placeholder rows are computed and then dropped.
  const auto text = decoder.embed(torch::tensor(ids, torch::kLong).unsqueeze(0)).squeeze(0);
  std::vector<torch::Tensor> embeds, biases;
  PromptSequence seq;
  int64_t pos = 0, run_start = 0;
  auto flush_text = [&](int64_t end) {
    if (end > run_start) {
      embeds.push_back(text.slice(0, run_start, end));
      biases.push_back(torch::zeros({end - run_start}, torch::kFloat));
      seq.segments.push_back({SequenceSegment::Kind::kText, pos, end - run_start});
      pos += end - run_start;
    }
  };
  int image = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(ids.size()); ++i) {
    if (!is_placeholder(ids[i])) continue;
    flush_text(i);
    const auto& tokens = images[image];
    embeds.push_back(tokens.embeddings.to(text.device(), text.scalar_type()));
    biases.push_back(tokens.log_bias.to(torch::kCPU, torch::kFloat));
    SequenceSegment segment{SequenceSegment::Kind::kImage, pos, tokens.embeddings.size(0), image};
    segment.token_grid = tokens.token_grid;
    segment.kept = tokens.kept;
    segment.time_step = tokens.time_step;
    seq.segments.push_back(std::move(segment));
    pos += tokens.embeddings.size(0);
    ++image;
    run_start = i + 1;
  }
  flush_text(static_cast<int64_t>(ids.size()));
  seq.embeds = torch::cat(embeds, 0).unsqueeze(0);
  seq.positions = torch::arange(pos, torch::kLong).unsqueeze(0);
  seq.key_log_bias = torch::cat(biases, 0).unsqueeze(0);
  return seq;
}

}  // namespace era
