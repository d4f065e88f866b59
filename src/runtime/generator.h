#pragma once
// Prefill, then one-token decode steps over the KV cache until EOS or the token limit; streams
// text as it becomes complete UTF-8.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "runtime/in_decoder_pruning.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "text/tokenizer.h"

namespace era {

// Whether `token` ends an answer (one of the manifest's tokens.stop_ids).
inline bool is_stop_token(const std::vector<int64_t>& stop_ids, int64_t token) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

// Receives each newly completed piece of answer text; returning false stops generation.
using TextCallback = std::function<bool(const std::string& delta)>;

struct GenerationLimits {
  int64_t max_new_tokens = 128;
  bool stop_at_eos = true;
};

struct GenerationOutput {
  std::vector<int64_t> tokens;  // generated ids (EOS not included)
  std::string text;             // decoded, special tokens skipped, not yet stripped
  std::string finish_reason;    // "eos", "length" or "cancelled"
  double prefill_ms = 0.0;
  std::vector<double> decode_ms;  // one per decode step
  // In-decoder pruning only (empty otherwise): per image span, the offsets inside it that layers
  // >= K kept, and how many image tokens those layers saw in all.
  std::vector<std::vector<int64_t>> kept_in_span;
  int64_t pruned_visual_tokens = 0;
};

class Generator {
 public:
  // With `pruning` (FastV, DART), prefill prunes inside the decoder (runtime/in_decoder_pruning.h)
  // and every decode step runs over the two groups of layers.
  // Generation ends (finish_reason "eos") at any of `stop_ids` (the manifest's tokens.stop_ids:
  // eos, and "<|im_end|>" for ChatML models).
  Generator(Decoder& decoder, const Tokenizer& tokenizer, std::vector<int64_t> stop_ids, LarSettings lar = {},
            const InDecoderPruning* pruning = nullptr)
      : decoder_(decoder), tokenizer_(tokenizer), stop_ids_(std::move(stop_ids)), lar_(std::move(lar)), pruning_(pruning) {}

  // `cache` must be empty and have room for the sequence plus max_new_tokens - 1 slots.
  GenerationOutput run(const PromptSequence& sequence, const GenerationLimits& limits, Sampler& sampler, KvCache& cache,
                       const TextCallback& on_text = nullptr);

 private:
  Decoder& decoder_;
  const Tokenizer& tokenizer_;
  std::vector<int64_t> stop_ids_;
  LarSettings lar_;
  const InDecoderPruning* pruning_;
};

}  // namespace era
