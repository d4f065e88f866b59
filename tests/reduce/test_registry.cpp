// The method registry's table and the options' field tables: every entry is complete for its
// stage, names are unique, the options an entry names exist, and the competing methods' options
// go through the same set / validate / JSON mechanism as ERA's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "era/methods.h"
#include "era/options.h"
#include "reduce/registry.h"
#include "test_support.h"

namespace era {
namespace {

TEST(MethodRegistry, EveryEntryIsCompleteForItsStage) {
  const auto baseline_keys = nlohmann::json::parse(baseline_options_json(BaselineOptions{}));
  std::set<std::string> names;
  for (const MethodSpec& m : method_registry()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    EXPECT_FALSE(m.summary.empty()) << m.name;
    for (const auto& key : m.options) EXPECT_TRUE(baseline_keys.contains(key)) << m.name << ": " << key;
    switch (m.stage) {
      case MethodStage::kNone:
        EXPECT_FALSE(m.make_reducer || m.make_pruner || m.era_options) << m.name;
        EXPECT_TRUE(is_unreduced_method(m.name));
        break;
      case MethodStage::kBeforeDecoder:
        EXPECT_TRUE(m.make_reducer) << m.name;
        EXPECT_FALSE(m.make_pruner) << m.name;
        break;
      case MethodStage::kInDecoder:
        EXPECT_TRUE(m.make_pruner && m.pruning_layer) << m.name;
        EXPECT_FALSE(m.make_reducer || m.era_options) << m.name;
        break;
    }
  }
  EXPECT_EQ(unreduced_method().name, kUnreducedMethod);
  EXPECT_EQ(available_methods().size(), method_registry().size());
  // The paper's module table: every ablation variant is an entry.
  for (const auto& v : era_variant_names()) EXPECT_TRUE(method_info("era:" + v).rectifies_attention) << v;
}

TEST(MethodRegistry, EntriesDriveTheStages) {
  ReductionRequest r;
  r.method = "era:dep-x";
  const EraOptions dep_x = effective_era_options(r);
  EXPECT_FALSE(dep_x.use_saliency);
  EXPECT_FALSE(dep_x.recycle);
  EXPECT_EQ(make_reducer(r)->name(), "era:dep-x");
  r.method = "fastv";  // nothing happens before the decoder
  EXPECT_EQ(make_reducer(r)->name(), "full");
  BaselineOptions b;
  b.dart_layer = 3;
  EXPECT_EQ(find_method("dart").pruning_layer(b), 3);
  EXPECT_EQ(make_in_decoder_pruner("dart", b, 8)->layer(), 3);
  test::expect_invalid_argument([&] { make_in_decoder_pruner("divprune", b, 8); }, "not an in-decoder");
  EXPECT_TRUE(find_method("divprune").capabilities.selects_packed_sequence);
  EXPECT_TRUE(find_method("visionzip").capabilities.per_crop_only);
  EXPECT_TRUE(find_method("cdpruner").capabilities.needs_instruction);
  EXPECT_FALSE(is_unreduced_method("nonsense"));
  test::expect_invalid_argument([] { find_method("nonsense"); }, "available: full, era, era:dep-x");
}

TEST(BaselineOptions, OneFieldTableForSetValidateAndJson) {
  BaselineOptions o;
  set_baseline_option(o, "fastv_layer=3");
  set_baseline_option(o, "dart_exact_budget=1");  // 1/0 stay accepted for these flags
  set_baseline_option(o, "visionzip_contextual_fraction=0.25");
  set_baseline_option(o, "random_seed=7");
  const auto j = nlohmann::json::parse(baseline_options_json(o));
  EXPECT_EQ(j["fastv_layer"], 3);
  EXPECT_EQ(j["dart_exact_budget"], true);
  EXPECT_EQ(j["visionzip_contextual_fraction"], 0.25);
  EXPECT_EQ(j["random_seed"], 7);
  // What the JSON says reads back as the same options.
  BaselineOptions back;
  for (const auto& [key, value] : j.items()) set_baseline_option(back, key + "=" + value.dump());
  EXPECT_EQ(baseline_options_json(back), baseline_options_json(o));

  test::expect_invalid_argument([&] { set_baseline_option(o, "fastv_layer=0"); }, "fastv_layer");
  test::expect_invalid_argument([&] { set_baseline_option(o, "visionzip_contextual_fraction=1"); },
                                "visionzip_contextual_fraction");
  test::expect_invalid_argument([&] { set_baseline_option(o, "random_seed=-1"); }, "random_seed");
  test::expect_invalid_argument([&] { set_baseline_option(o, "dart_text_pivots=x"); }, "dart_text_pivots");
  test::expect_invalid_argument([&] { set_baseline_option(o, "speed=11"); }, "known: random_seed");
  test::expect_invalid_argument([&] { set_baseline_option(o, "fastv_layer"); }, "key=value");
  BaselineOptions bad;
  bad.dart_image_pivots = -1;
  test::expect_invalid_argument([&] { validate_baseline_options(bad); }, "dart_image_pivots");
  validate_baseline_options(BaselineOptions{});
}

}  // namespace
}  // namespace era
