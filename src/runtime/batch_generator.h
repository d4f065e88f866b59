#pragma once
// Several prompt sequences decoded together: left-padded into one [B, L] prefill, then one
// [B, 1] decode step per token. Padded key slots carry a large negative LAR log-bias, so they
// get no attention mass (exactly zero after the softmax) and every row computes what it would
// alone; positions count from 0 at each row's first real token.
#include <vector>

#include "model/decoder.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "text/tokenizer.h"

namespace era {

// Log-bias of a padding key: exp(-1000) is 0 in float32, and sqrt(d) * 1000 still fits fp16.
inline constexpr float kPaddingLogBias = -1000.0f;

class BatchGenerator {
 public:
  // `stop_ids`: as Generator's.
  BatchGenerator(Decoder& decoder, const Tokenizer& tokenizer, std::vector<int64_t> stop_ids, LarSettings lar = {})
      : decoder_(decoder), tokenizer_(tokenizer), stop_ids_(std::move(stop_ids)), lar_(std::move(lar)) {}

  // One output per sequence (same fields as Generator::run; prefill_ms and decode_ms are the
  // batch's, shared by every row). `limits[i]` and `samplers[i]` belong to sequence i.
  std::vector<GenerationOutput> run(const std::vector<PromptSequence>& sequences, const std::vector<GenerationLimits>& limits,
                                    std::vector<Sampler>& samplers, int64_t* kv_bytes_used = nullptr,
                                    int64_t* kv_bytes_allocated = nullptr);

 private:
  Decoder& decoder_;
  const Tokenizer& tokenizer_;
  std::vector<int64_t> stop_ids_;
  LarSettings lar_;
};

}  // namespace era
