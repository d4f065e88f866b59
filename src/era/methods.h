#pragma once
// The visual-token reduction methods this build knows, and how a request chooses one. The list
// comes from the library's one method registry: command-line help, validation, era_eval, era_bench
// and era_score all read it, so a method added there appears everywhere.
#include <cstdint>
#include <string>
#include <vector>

#include "era/options.h"

namespace era {

// The name of the method that keeps every token (MethodStage::kNone): the reference every
// reduction is compared with, in era_eval's run plan and era_score's tables.
inline constexpr const char* kUnreducedMethod = "full";
inline bool is_unreduced_method(const std::string& name) { return name == kUnreducedMethod; }

// Which visual-token reduction runs, with which budget.
struct ReductionRequest {
  // A name from available_methods(): "full" (no reduction), "era" or an ERA ablation
  // ("era:dep-x", "era:dep-y", "era:dep", "era:dep+btr", "era:era"), a competing method before the
  // decoder ("divprune", "visionzip", "cdpruner", "pool", "random") or inside it ("fastv",
  // "dart": every visual token enters the decoder, layers >= K keep `tokens` of them per image;
  // on LLaVA-NeXT of the whole image span, newlines included, regardless of `scope`; DART keeps
  // 4 + 8 * floor(tokens / 8) unless baselines.dart_exact_budget).
  std::string method = kUnreducedMethod;
  int64_t tokens = 0;         // visual tokens to keep per image; 0 = use keep_ratio
  float keep_ratio = 0.0f;    // fraction of each image's tokens to keep when tokens == 0; 0 = all
  EraOptions era;             // ERA hyper-parameters and switches (defaults: configs/era.json)
  BaselineOptions baselines;  // parameters of the competing methods
  // LLaVA-NeXT only. `tokens` is the nominal budget per image as the paper counts it (160 =
  // 32 per crop x 5 crops, the most a pinpoint grid gives). "crop": each crop (base and every
  // tile) keeps tokens / 5, selected before unpad (default); "image": one selection over all
  // crops keeps `tokens`. Newline tokens come on top; Stats::visual_tokens is the real count.
  std::string scope = "crop";
  // Qwen2.5-VL (multimodal RoPE): the positions of a reduced image's or video's tokens. "original":
  // each kept token keeps its (t, h, w) position in the full grid and the text after the item goes
  // on as if nothing was removed (as the Qwen pruning runtimes do); "compact": the kept tokens take
  // consecutive positions, like text. Other families number every token 0..L-1 either way.
  std::string positions = "original";
};

enum class MethodStage {
  kNone,           // "full": every visual token reaches the decoder
  kBeforeDecoder,  // between the projector and the decoder (ERA, DivPrune, VisionZip, ...)
  kInDecoder,      // inside the decoder's prefill, after layer K (FastV, DART)
};

struct MethodInfo {
  std::string name;  // as ReductionRequest::method spells it
  MethodStage stage = MethodStage::kNone;
  std::string summary;               // one line, for help texts
  bool rectifies_attention = false;  // ERA and its ablations: reads ReductionRequest::era and
                                     // feeds per-token log b_k to the decoder (LAR)
  std::vector<std::string> options;  // the BaselineOptions fields it reads
};

// "none", "before-decoder", "in-decoder".
const char* to_string(MethodStage stage);

// Every method, in the registry's order (full, ERA and its ablations, the competing methods).
std::vector<MethodInfo> available_methods();

// The method of that name; throws era::Error(kInvalidArgument) naming it and listing the known
// ones.
MethodInfo method_info(const std::string& name);

// The ERA options `request.method` runs with: an ablation variant applied on top of
// `request.era` ("era:dep-x" turns the other modules off); `request.era` as given otherwise.
// Throws like method_info for an unknown method.
EraOptions effective_era_options(const ReductionRequest& request);

}  // namespace era
