// The competing methods' options (era/options.h) through one field table, like ERA's.
#include <cstdint>

#include "era/options.h"
#include "util/field_table.h"

namespace era {
namespace {

using namespace fields;

// Layers and pivot counts are bounded far above any real model so a typo cannot allocate the
// world; the FastV/DART layer is checked against the decoder's real depth when a model runs it.
constexpr int64_t kMaxCount = 1000000;

const FieldTable<BaselineOptions>& baseline_option_table() {
  static const FieldTable<BaselineOptions> t(
      "method option",
      {
          integer("random_seed", &BaselineOptions::random_seed, 0, INT64_MAX),
          number("visionzip_contextual_fraction", &BaselineOptions::visionzip_contextual_fraction, 0.0, 1.0, false,
                 /*open_high=*/true),
          boolean("cdpruner_negate_relevance", &BaselineOptions::cdpruner_negate_relevance, true),
          integer("fastv_layer", &BaselineOptions::fastv_layer, 1, kMaxCount),
          integer("dart_layer", &BaselineOptions::dart_layer, 1, kMaxCount),
          integer("dart_image_pivots", &BaselineOptions::dart_image_pivots, 0, kMaxCount),
          integer("dart_text_pivots", &BaselineOptions::dart_text_pivots, 0, kMaxCount),
          boolean("dart_exact_budget", &BaselineOptions::dart_exact_budget, true),
      });
  return t;
}

}  // namespace

void set_baseline_option(BaselineOptions& options, const std::string& key_value) {
  baseline_option_table().set_text(options, key_value, "method option");
}

void validate_baseline_options(const BaselineOptions& options) { baseline_option_table().validate(options, "method options: "); }

std::string baseline_options_json(const BaselineOptions& options, int indent) {
  return baseline_option_table().json(options, indent);
}

}  // namespace era
