#pragma once
// The one method registry. Every reduction method is one entry here: its name, the stage it runs
// in, what it can do and needs, the options it reads and its factory. Everything that depends on
// the method (validation, the reduction stage, LAR, in-decoder pruning, help texts, era_eval,
// era_bench, era_score) asks the entry; no method name is compared anywhere else.
//
// Adding a method: write it as one file (a Reducer in reduce/, or an InDecoderPruner), then add
// one entry to the table in registry.cpp.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "era/methods.h"
#include "era/options.h"
#include "reduce/in_decoder_pruner.h"
#include "reduce/reducer.h"

namespace era {

// What a method can do and needs, for the stages that call it.
struct MethodCapabilities {
  // LLaVA-NeXT: selects over the packed image sequence (base + unpadded grid + newlines) with the
  // whole budget, instead of per crop before unpad (DivPrune's official NeXT path).
  bool selects_packed_sequence = false;
  // Defined on one crop's token grid only: refuses LLaVA-NeXT's "image" budget scope (VisionZip, pool).
  bool per_crop_only = false;
  // Reads ReductionInput::instruction_embeddings (CDPruner's relevance).
  bool needs_instruction = false;
  // Reads the vision tower's CLS token (VisionZip's dominant tokens and contextual merge): refused
  // on towers without one (SigLIP, LLaVA-OneVision).
  bool needs_cls = false;
};

struct MethodSpec {
  std::string name;
  MethodStage stage = MethodStage::kNone;
  std::string summary;
  MethodCapabilities capabilities;
  std::vector<std::string> options;  // BaselineOptions fields it reads
  // ERA and its ablations: the options the entry runs with, given the request's (a variant turns
  // modules off). Null for every other method: it reads no ERA option and sends no LAR bias.
  std::function<EraOptions(const EraOptions&)> era_options;
  // kNone / kBeforeDecoder: the reducer between the projector and the decoder.
  std::function<std::unique_ptr<Reducer>(const ReductionRequest&)> make_reducer;
  // kInDecoder: the pruner for a decoder of `num_layers` layers (throws naming a bad layer option).
  std::function<std::unique_ptr<InDecoderPruner>(const BaselineOptions&, int64_t num_layers)> make_pruner;

  // kInDecoder: the decoder layer K it prunes after, as the options set it.
  std::function<int64_t(const BaselineOptions&)> pruning_layer;

  bool rectifies_attention() const { return static_cast<bool>(era_options); }
};

// Every entry, in the order help texts list them.
const std::vector<MethodSpec>& method_registry();

// The entry of that name; throws era::Error(kInvalidArgument) naming it and listing the known ones.
const MethodSpec& find_method(const std::string& name);

// The entry that keeps every token ("full"): the reference every reduction is compared with.
const MethodSpec& unreduced_method();

// The reducer that runs before the decoder for `request.method`: the method's own, or "keep
// every token" for "full" and the in-decoder methods. Throws like find_method.
std::unique_ptr<Reducer> make_reducer(const ReductionRequest& request);

// The pruner of an in-decoder method; throws era::Error(kInvalidArgument) for any other method or
// a bad layer option.
std::unique_ptr<InDecoderPruner> make_in_decoder_pruner(const std::string& method, const BaselineOptions& options,
                                                        int64_t num_layers);

}  // namespace era
