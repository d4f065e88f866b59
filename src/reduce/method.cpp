#include "reduce/method.h"

#include "era/error.h"
#include "reduce/cdpruner.h"
#include "reduce/divprune.h"
#include "reduce/era_reducer.h"
#include "reduce/pooling.h"
#include "reduce/random_pruning.h"
#include "reduce/visionzip.h"

namespace era {
namespace {

const std::string kVariantPrefix = "era:";

bool is_variant(const std::string& method) { return method.rfind(kVariantPrefix, 0) == 0; }

bool is_era_method(const std::string& method) {
  if (method == "era") return true;
  for (const auto& v : era_variant_names()) {
    if (method == kVariantPrefix + v) return true;
  }
  return false;
}

std::string known_methods() {
  std::string names = "full, era";
  for (const auto& v : era_variant_names()) names += ", " + kVariantPrefix + v;
  for (const auto& m : pre_llm_baseline_names()) names += ", " + m;
  names += ", fastv, dart";
  return names;
}

}  // namespace

std::unique_ptr<Reducer> make_reducer(const ReductionOptions& options) {
  if (options.method == "full") return std::make_unique<FullReducer>();
  // FastV and DART prune inside the decoder (runtime/in_decoder_pruning.h): before it they keep
  // every token.
  if (options.method == "fastv" || options.method == "dart") return std::make_unique<FullReducer>();
  if (is_era_method(options.method)) {
    return std::make_unique<EraReducer>(effective_era_options(options), options.method);
  }
  const BaselineOptions& b = options.baselines;
  if (options.method == "divprune") return std::make_unique<DivPruneReducer>();
  if (options.method == "visionzip") return std::make_unique<VisionZipReducer>(b.visionzip_contextual_fraction);
  if (options.method == "cdpruner") return std::make_unique<CdPrunerReducer>(b.cdpruner_negate_relevance);
  if (options.method == "pool") return std::make_unique<PoolReducer>();
  if (options.method == "random") return std::make_unique<RandomReducer>(b.random_seed);
  throw Error(ErrorCode::kInvalidArgument,
              "unknown reduction method '" + options.method + "' (available: " + known_methods() + ")");
}

const std::vector<std::string>& pre_llm_baseline_names() {
  static const std::vector<std::string> names = {"divprune", "visionzip", "cdpruner", "pool", "random"};
  return names;
}

bool reduces_packed_sequence(const std::string& method) { return method == "divprune"; }

bool selects_per_crop_only(const std::string& method) { return method == "visionzip" || method == "pool"; }

bool needs_instruction_embeddings(const std::string& method) { return method == "cdpruner"; }

EraOptions effective_era_options(const ReductionOptions& options) {
  if (!is_era_method(options.method) || !is_variant(options.method)) return options.era;
  return apply_era_variant(options.era, options.method.substr(kVariantPrefix.size()));
}

}  // namespace era
