#pragma once
// The ERA reducer: DEP picks K anchors, BTR merges the pruned tokens into them and estimates each
// cluster's bias, and LAR's log b_k goes out with the tokens for the decoder to add to its
// attention logits. Which modules run, and on which signals, follows EraOptions.
#include "era/options.h"
#include "reduce/reducer.h"

namespace era {

class EraReducer final : public Reducer {
 public:
  // Throws era::Error(kInvalidArgument) for invalid options (validate_era_options).
  // `name` is the method it was made for ("era", "era:dep-x", ...).
  explicit EraReducer(EraOptions options, std::string name = "era");
  std::string name() const override { return name_; }
  const EraOptions& options() const { return options_; }

  // x (for similarities) is `embeddings` or `features` (feature_space); A is one of the four maps
  // (readout x saliency_source). Budget <= 0 or >= N keeps every token unchanged with bias 0 (the
  // entropy is still reported when A is there). Throws era::Error(kInvalidArgument) for missing
  // or misshapen inputs or non-finite values.
  ReducedTokens reduce(const ReductionInput& input) const override;

 private:
  EraOptions options_;
  std::string name_;
};

}  // namespace era
