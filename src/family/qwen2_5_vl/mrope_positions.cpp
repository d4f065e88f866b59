#include "family/qwen2_5_vl/mrope_positions.h"

#include <algorithm>

#include "era/error.h"

namespace era {

torch::Tensor mrope_positions(const PromptSequence& sequence) {
  const int64_t length = sequence.length();
  auto positions = torch::empty({1, length, 3}, torch::kLong);
  auto p = positions.accessor<int64_t, 3>();
  int64_t current = 0;
  const auto count_up = [&](int64_t start, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[0][start + i][0] = p[0][start + i][1] = p[0][start + i][2] = current + i;
    current += n;
  };
  for (const SequenceSegment& s : sequence.segments) {
    const auto [t, h, w] = s.token_grid;
    if (s.kind == SequenceSegment::Kind::kText || t == 0) {
      count_up(s.start, s.length);
      continue;
    }
    if (sequence.compact_positions) {
      count_up(s.start, s.length);
      continue;
    }
    if (static_cast<int64_t>(s.kept.size()) != s.length) {
      throw Error(ErrorCode::kRuntime, "multimodal positions: a visual segment of " + std::to_string(s.length) +
                                           " tokens lists " + std::to_string(s.kept.size()) + " original indices");
    }
    for (int64_t i = 0; i < s.length; ++i) {
      const int64_t k = s.kept[static_cast<size_t>(i)];
      if (k < 0 || k >= t * h * w) {
        throw Error(ErrorCode::kRuntime, "multimodal positions: token index " + std::to_string(k) + " is outside its " +
                                             std::to_string(t) + "x" + std::to_string(h) + "x" + std::to_string(w) + " grid");
      }
      p[0][s.start + i][0] = current + (k / (h * w)) * s.time_step;
      p[0][s.start + i][1] = current + (k / w) % h;
      p[0][s.start + i][2] = current + k % w;
    }
    current += std::max(h, w);
  }
  return positions;
}

}  // namespace era
