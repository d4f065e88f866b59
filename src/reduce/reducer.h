#pragma once
// Stage 3: visual-token reduction between the projector and the decoder. One interface for every
// method (no reduction, ERA, and the baselines), so the rest of the pipeline never knows which
// one ran.
#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

namespace era {

// One image's visual tokens as the vision stage produced them.
struct ReductionInput {
  torch::Tensor embeddings;      // [N, D] projector outputs
  torch::Tensor saliency_logits; // [H, N] float32 CLS-query attention logits
  torch::Tensor saliency_probs;  // [H, N] float32 CLS-query attention probabilities
};

// What the decoder gets for that image, and what happened.
struct ReducedTokens {
  torch::Tensor embeddings;   // [K, D] tokens fed to the decoder, in this order
  torch::Tensor log_bias;     // [K] float32: LAR's log b_k for each token as a key (0 = none)
  std::vector<int64_t> kept;  // [K] index into the N original tokens of each fed token
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string name() const = 0;
  virtual ReducedTokens reduce(const ReductionInput& input) const = 0;
};

// "full": every token, in order, no bias.
class FullReducer final : public Reducer {
 public:
  std::string name() const override { return "full"; }
  ReducedTokens reduce(const ReductionInput& input) const override;
};

// The reducer for a method name; throws era::Error(kInvalidArgument) for an unknown one.
std::unique_ptr<Reducer> make_reducer(const std::string& method);

}  // namespace era
