#pragma once
// Prefill, then one-token decode steps over the KV cache until EOS or the token limit; streams
// text as it becomes complete UTF-8.
#include <functional>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "text/tokenizer.h"

namespace era {

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
};

class Generator {
 public:
  Generator(Decoder& decoder, const Tokenizer& tokenizer, int64_t eos_id, LarSettings lar = {})
      : decoder_(decoder), tokenizer_(tokenizer), eos_id_(eos_id), lar_(std::move(lar)) {}

  // `cache` must be empty and have room for the sequence plus max_new_tokens - 1 slots.
  GenerationOutput run(const PromptSequence& sequence, const GenerationLimits& limits, Sampler& sampler, KvCache& cache,
                       const TextCallback& on_text = nullptr);

 private:
  Decoder& decoder_;
  const Tokenizer& tokenizer_;
  int64_t eos_id_;
  LarSettings lar_;
};

}  // namespace era
