#pragma once
// Stage 3: visual-token reduction between the projector and the decoder. One interface for every
// method (no reduction, ERA and its ablations, the baselines), so the rest of the pipeline never
// knows which one ran.
#include <torch/script.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace era {

// One image (one crop on LLaVA-NeXT) as the vision stage produced it. Tensors are on the model's
// device; saliency maps are float32.
struct ReductionInput {
  torch::Tensor embeddings;   // [N, D] projector outputs (LLM space)
  torch::Tensor features;     // [N, C] vision features fed to the projector
  torch::Tensor cls_logits;   // [H, N] CLS-query attention logits of the feature layer
  torch::Tensor cls_probs;    // [H, N] CLS-query attention probabilities (CLS column dropped)
  torch::Tensor mean_logits;  // [H, N] the same, averaged over all patch-query rows
  torch::Tensor mean_probs;   // [H, N]
  int64_t budget = 0;         // tokens to keep; <= 0 or >= N keeps all

  // ---- Inputs only some competing methods use (undefined / empty when not available) --------
  torch::Tensor cls_feature;  // [C] the CLS token's vision feature (VisionZip)
  torch::Tensor mean_keys;    // [N+1, hd] float32 head-mean keys, CLS first (VisionZip)
  // Vision features [n, C] -> LLM embeddings [n, D] through the bundle's projector (VisionZip
  // merges before the projector).
  std::function<torch::Tensor(const torch::Tensor&)> project;
  // [M, D] the decoder's input embeddings of the instruction's text tokens (CDPruner relevance).
  torch::Tensor instruction_embeddings;
  // [n_crops * N, D] every crop of the same image (LLaVA-NeXT per-crop path): lets a per-crop
  // method normalise over the whole image, as CDPruner's relevance min-max does.
  torch::Tensor image_embeddings;
};

// What the decoder gets for that image, and what happened.
struct ReducedTokens {
  torch::Tensor embeddings;         // [K, D] tokens fed to the decoder, in this order (model dtype)
  torch::Tensor log_bias;           // [K] float32: LAR's log b_k of each token as a key (0 = none)
  std::vector<int64_t> kept;        // [K] original index of each fed token (its anchor); ascending
                                    //     except VisionZip ([CLS, dominant, contextual])
  std::vector<int64_t> assignment;  // [N] for every original token, the output slot (0..K-1) of
                                    //     the cluster it went into; -1 if it was dropped
  std::vector<float> entropy;       // [N] head-distribution entropy (empty if not computed)
  // [K] or empty (= all false): the token stands for no single patch position (VisionZip's CLS
  // and contextual tokens). Its `kept` entry is still a patch of its crop (the anchor used for
  // pictures); LLaVA-NeXT packing puts the tile crops' off-grid tokens after the grid.
  std::vector<bool> off_grid;
  // Native-resolution items (Qwen2.5-VL): the item's token grid (t, h, w in tokens; 0 = not a
  // grid item) and the M-RoPE time step between temporal patches; `kept` indexes that grid
  // (t-major, then raster), which is what each kept token's 3-D position comes from.
  std::array<int64_t, 3> token_grid{0, 0, 0};
  int64_t time_step = 1;
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string name() const = 0;
  virtual ReducedTokens reduce(const ReductionInput& input) const = 0;
};

// The tokens `kept` (original indices, ascending) of `input.embeddings`, fed as they are: no bias,
// every other token dropped (assignment -1). What every pure selection method returns.
ReducedTokens select_tokens(const ReductionInput& input, const std::vector<int64_t>& kept);

// 0, 1, ..., n-1: the selection when the budget keeps everything.
std::vector<int64_t> all_indices(int64_t n);

// "full": every token, in order, no bias.
class FullReducer final : public Reducer {
 public:
  std::string name() const override { return "full"; }
  ReducedTokens reduce(const ReductionInput& input) const override;
};

}  // namespace era
