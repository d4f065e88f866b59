#include "reduce/registry.h"

#include "era/error.h"
#include "reduce/cdpruner.h"
#include "reduce/dart.h"
#include "reduce/divprune.h"
#include "reduce/era_reducer.h"
#include "reduce/fastv.h"
#include "reduce/pooling.h"
#include "reduce/random_pruning.h"
#include "reduce/visionzip.h"

namespace era {
namespace {

MethodSpec before_decoder(std::string name, std::string summary, MethodCapabilities caps, std::vector<std::string> options,
                          std::function<std::unique_ptr<Reducer>(const ReductionRequest&)> make) {
  MethodSpec m;
  m.name = std::move(name);
  m.stage = MethodStage::kBeforeDecoder;
  m.summary = std::move(summary);
  m.capabilities = caps;
  m.options = std::move(options);
  m.make_reducer = std::move(make);
  return m;
}

MethodSpec in_decoder(std::string name, std::string summary, std::vector<std::string> options,
                      std::function<std::unique_ptr<InDecoderPruner>(const BaselineOptions&, int64_t)> make,
                      std::function<int64_t(const BaselineOptions&)> layer) {
  MethodSpec m;
  m.name = std::move(name);
  m.stage = MethodStage::kInDecoder;
  m.summary = std::move(summary);
  m.options = std::move(options);
  m.make_pruner = std::move(make);
  m.pruning_layer = std::move(layer);
  return m;
}

// "era" and each ablation row of the paper's module table ("era:<variant>"): one reducer (DEP,
// BTR; LAR in the decoder) with the variant's modules switched.
MethodSpec era_entry(const std::string& name, const std::string& variant, std::string summary) {
  auto options = [variant](const EraOptions& era) { return variant.empty() ? era : apply_era_variant(era, variant); };
  MethodSpec m = before_decoder(name, std::move(summary), {}, {}, [options, name](const ReductionRequest& r) {
    return std::make_unique<EraReducer>(options(r.era), name);
  });
  m.era_options = options;
  return m;
}

std::vector<MethodSpec> build_registry() {
  std::vector<MethodSpec> table;
  MethodSpec full;
  full.name = kUnreducedMethod;
  full.stage = MethodStage::kNone;
  full.summary = "no reduction: every visual token reaches the decoder";
  table.push_back(full);

  table.push_back(era_entry("era", "", "ERA: DEP anchors + BTR recycling + LAR attention rectification"));
  const std::vector<std::pair<std::string, std::string>> ablations = {
      {"dep-x", "ERA ablation: DEP on the visual view x only (max-min diversity)"},
      {"dep-y", "ERA ablation: DEP on the head-saliency view y only"},
      {"dep", "ERA ablation: DEP on both views, no recycling, no LAR"},
      {"dep+btr", "ERA ablation: DEP + BTR recycling, no LAR"},
      {"era", "ERA ablation row 'era' (= era with every module on)"},
  };
  for (const auto& [variant, summary] : ablations) table.push_back(era_entry("era:" + variant, variant, summary));

  MethodCapabilities packed;
  packed.selects_packed_sequence = true;
  table.push_back(before_decoder("divprune", "DivPrune: greedy max-min diversity on the projected tokens", packed, {},
                                 [](const ReductionRequest&) { return std::make_unique<DivPruneReducer>(); }));
  MethodCapabilities per_crop;
  per_crop.per_crop_only = true;
  MethodCapabilities cls_per_crop = per_crop;
  cls_per_crop.needs_cls = true;
  table.push_back(before_decoder("visionzip", "VisionZip: dominant tokens by CLS attention + merged contextual tokens",
                                 cls_per_crop, {"visionzip_contextual_fraction"}, [](const ReductionRequest& r) {
                                   return std::make_unique<VisionZipReducer>(r.baselines.visionzip_contextual_fraction);
                                 }));
  MethodCapabilities instruction;
  instruction.needs_instruction = true;
  table.push_back(before_decoder("cdpruner", "CDPruner: conditional DPP on instruction relevance (no CLIP text tower)",
                                 instruction, {"cdpruner_negate_relevance"}, [](const ReductionRequest& r) {
                                   return std::make_unique<CdPrunerReducer>(r.baselines.cdpruner_negate_relevance);
                                 }));
  table.push_back(before_decoder("pool", "uniform spatial average pooling of the token grid", per_crop, {},
                                 [](const ReductionRequest&) { return std::make_unique<PoolReducer>(); }));
  table.push_back(before_decoder("random", "seeded uniform random selection", {}, {"random_seed"}, [](const ReductionRequest& r) {
    return std::make_unique<RandomReducer>(r.baselines.random_seed);
  }));

  table.push_back(in_decoder("fastv", "FastV: after layer K, keep the image tokens the last prompt token attends to most",
                             {"fastv_layer"}, make_fastv_pruner, [](const BaselineOptions& o) { return o.fastv_layer; }));
  table.push_back(in_decoder("dart", "DART: after layer K, pivots keep the image tokens least similar to them",
                             {"dart_layer", "dart_image_pivots", "dart_text_pivots", "dart_exact_budget"}, make_dart_pruner,
                             [](const BaselineOptions& o) { return o.dart_layer; }));
  return table;
}

std::string known_names() {
  std::string names;
  for (const auto& m : method_registry()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

MethodInfo info_of(const MethodSpec& m) {
  MethodInfo i;
  i.name = m.name;
  i.stage = m.stage;
  i.summary = m.summary;
  i.rectifies_attention = m.rectifies_attention();
  i.options = m.options;
  return i;
}

}  // namespace

const std::vector<MethodSpec>& method_registry() {
  static const std::vector<MethodSpec> table = build_registry();
  return table;
}

const MethodSpec& find_method(const std::string& name) {
  for (const auto& m : method_registry()) {
    if (m.name == name) return m;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown reduction method '" + name + "' (available: " + known_names() + ")");
}

const MethodSpec& unreduced_method() {
  for (const auto& m : method_registry()) {
    if (m.stage == MethodStage::kNone) return m;
  }
  throw Error(ErrorCode::kRuntime, "the method registry has no unreduced entry");
}

std::unique_ptr<Reducer> make_reducer(const ReductionRequest& request) {
  const MethodSpec& m = find_method(request.method);
  // "full" keeps every token; so does the stage before the decoder for the in-decoder methods.
  if (!m.make_reducer) return std::make_unique<FullReducer>();
  return m.make_reducer(request);
}

std::unique_ptr<InDecoderPruner> make_in_decoder_pruner(const std::string& method, const BaselineOptions& options,
                                                        int64_t num_layers) {
  const MethodSpec& m = find_method(method);
  if (!m.make_pruner) {
    throw Error(ErrorCode::kInvalidArgument, "'" + method + "' is not an in-decoder pruning method");
  }
  return m.make_pruner(options, num_layers);
}

// ---- the public view (era/methods.h) -----------------------------------------------------------

const char* to_string(MethodStage stage) {
  switch (stage) {
    case MethodStage::kNone: return "none";
    case MethodStage::kBeforeDecoder: return "before-decoder";
    case MethodStage::kInDecoder: return "in-decoder";
  }
  return "?";
}

std::vector<MethodInfo> available_methods() {
  std::vector<MethodInfo> out;
  for (const auto& m : method_registry()) out.push_back(info_of(m));
  return out;
}

MethodInfo method_info(const std::string& name) { return info_of(find_method(name)); }

EraOptions effective_era_options(const ReductionRequest& request) {
  const MethodSpec& m = find_method(request.method);
  return m.era_options ? m.era_options(request.era) : request.era;
}

}  // namespace era
