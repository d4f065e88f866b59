// ERA options: configs/era.json is exactly the built-in defaults, the config file, --set and the
// JSON dump agree on every key, bad keys and values are refused by name, variants switch the right
// modules, and the LAR layer schedules.
#include "era/options.h"
#include "reduce/lar_schedule.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "test_support.h"

namespace era {
namespace {

void expect_same_options(const EraOptions& a, const EraOptions& b) {
  EXPECT_EQ(a.alpha, b.alpha);
  EXPECT_EQ(a.eta, b.eta);
  EXPECT_EQ(a.epsilon, b.epsilon);
  EXPECT_EQ(a.saliency_source, b.saliency_source);
  EXPECT_EQ(a.readout, b.readout);
  EXPECT_EQ(a.feature_space, b.feature_space);
  EXPECT_EQ(a.normalized_entropy_penalty, b.normalized_entropy_penalty);
  EXPECT_EQ(a.use_diversity, b.use_diversity);
  EXPECT_EQ(a.use_saliency, b.use_saliency);
  EXPECT_EQ(a.recycle, b.recycle);
  EXPECT_EQ(a.match_space, b.match_space);
  EXPECT_EQ(a.lambda, b.lambda);
  EXPECT_EQ(a.rectify, b.rectify);
  EXPECT_EQ(a.lar_schedule, b.lar_schedule);
  EXPECT_EQ(a.lar_early_layers, b.lar_early_layers);
  EXPECT_EQ(a.lar_path, b.lar_path);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/era_opts_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

// Runs `f`, expects an era::Error(kInvalidArgument) whose message contains every needle.
template <class F>
void expect_invalid(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(EraOptions, ShippedConfigIsExactlyTheDefaults) {
  const auto path = test::source_dir() + "/configs/era.json";
  expect_same_options(load_era_options(path), EraOptions{});
  // Every option is spelled out in the file, none left to the built-in default.
  const auto file = nlohmann::json::parse(test::read_file(path));
  const auto dumped = nlohmann::json::parse(era_options_json(EraOptions{}));
  EXPECT_EQ(file, dumped);
}

TEST(EraOptions, JsonRoundTripOfEveryField) {
  EraOptions o;
  o.alpha = 0.7f;
  o.eta = 2.5f;
  o.epsilon = 1e-6f;
  o.saliency_source = SaliencySource::kProbs;
  o.readout = SaliencyReadout::kMean;
  o.feature_space = FeatureSpace::kVision;
  o.normalized_entropy_penalty = false;
  o.use_diversity = false;
  o.recycle = false;
  o.match_space = MatchSpace::kZ;
  o.lambda = 1.0f;
  o.rectify = false;
  o.lar_schedule = LarSchedule::kLinearDecay;
  o.lar_early_layers = 7;
  o.lar_path = LarPath::kAdditiveMask;
  const auto text = era_options_json(o, 2);
  expect_same_options(load_era_options(write_temp("roundtrip.json", text)), o);
  // Floats print as their shortest decimal, and the values use the config spellings.
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["eta"].dump(), "2.5");
  EXPECT_EQ(j["epsilon"].dump(), "1e-06");
  EXPECT_EQ(j["lar_schedule"], "linear");
  EXPECT_EQ(j["lar_path"], "mask");
  EXPECT_EQ(j["saliency_source"], "probs");
  EXPECT_EQ(j["match_space"], "z");
}

TEST(EraOptions, PartialConfigKeepsTheBase) {
  EraOptions base;
  base.eta = 0.9f;
  const auto o = load_era_options(write_temp("partial.json", R"({"alpha": 2, "readout": "mean"})"), base);
  EXPECT_EQ(o.alpha, 2.0f);
  EXPECT_EQ(o.readout, SaliencyReadout::kMean);
  EXPECT_EQ(o.eta, 0.9f);
}

TEST(EraOptions, BadConfigFilesNameTheFileAndKey) {
  const auto unknown = write_temp("unknown.json", R"({"alpha": 0.5, "gamma": 1})");
  expect_invalid([&] { load_era_options(unknown); }, {unknown, "gamma"});
  const auto bad_enum = write_temp("enum.json", R"({"lar_schedule": "sometimes"})");
  expect_invalid([&] { load_era_options(bad_enum); }, {bad_enum, "lar_schedule", "all early linear"});
  const auto bad_type = write_temp("type.json", R"({"recycle": 1})");
  expect_invalid([&] { load_era_options(bad_type); }, {bad_type, "recycle", "true or false"});
  const auto out_of_range = write_temp("range.json", R"({"lambda": 1.5})");
  expect_invalid([&] { load_era_options(out_of_range); }, {out_of_range, "lambda"});
  const auto negative = write_temp("neg.json", R"({"eta": -0.1})");
  expect_invalid([&] { load_era_options(negative); }, {negative, "eta"});
  const auto float_int = write_temp("int.json", R"({"lar_early_layers": 2.5})");
  expect_invalid([&] { load_era_options(float_int); }, {float_int, "lar_early_layers"});
  const auto broken = write_temp("broken.json", R"({"alpha": )");
  expect_invalid([&] { load_era_options(broken); }, {broken, "invalid JSON"});
  const auto array = write_temp("array.json", "[1, 2]");
  expect_invalid([&] { load_era_options(array); }, {array, "object"});
  expect_invalid([] { load_era_options("/no/such/era.json"); }, {"/no/such/era.json"});
}

TEST(EraOptions, SetUsesTheConfigNames) {
  EraOptions o;
  set_era_option(o, "alpha=0.25");
  set_era_option(o, "eta=3");
  set_era_option(o, "lar_schedule=early");
  set_era_option(o, "lar_early_layers=5");
  set_era_option(o, "recycle=false");
  set_era_option(o, "feature_space=vision");
  set_era_option(o, "saliency_source=\"probs\"");
  EXPECT_EQ(o.alpha, 0.25f);
  EXPECT_EQ(o.eta, 3.0f);
  EXPECT_EQ(o.lar_schedule, LarSchedule::kEarlyLayers);
  EXPECT_EQ(o.lar_early_layers, 5);
  EXPECT_FALSE(o.recycle);
  EXPECT_EQ(o.feature_space, FeatureSpace::kVision);
  EXPECT_EQ(o.saliency_source, SaliencySource::kProbs);

  expect_invalid([&] { set_era_option(o, "beta=1"); }, {"beta", "known: alpha"});
  expect_invalid([&] { set_era_option(o, "alpha=abc"); }, {"alpha"});
  expect_invalid([&] { set_era_option(o, "alpha="); }, {"alpha"});
  expect_invalid([&] { set_era_option(o, "alpha"); }, {"key=value"});
  expect_invalid([&] { set_era_option(o, "=1"); }, {"key=value"});
  expect_invalid([&] { set_era_option(o, "epsilon=0"); }, {"epsilon"});
  expect_invalid([&] { set_era_option(o, "alpha=1e60"); }, {"alpha"});  // overflows a float
  expect_invalid([&] { set_era_option(o, "rectify=yes"); }, {"rectify"});
  EXPECT_EQ(o.alpha, 0.25f);  // a refused value changes nothing
}

TEST(EraOptions, ValidationRefusesAnEmptyDualView) {
  EraOptions o;
  o.use_diversity = o.use_saliency = false;
  expect_invalid([&] { validate_era_options(o); }, {"use_diversity"});
  EraOptions bad;
  bad.lambda = -1.0f;
  expect_invalid([&] { validate_era_options(bad); }, {"lambda"});
  validate_era_options(EraOptions{});
}

TEST(EraOptions, VariantsSwitchTheRightModules) {
  EraOptions base;
  base.alpha = 0.9f;
  base.eta = 0.4f;
  base.use_diversity = base.use_saliency = base.recycle = base.rectify = false;
  struct Row {
    const char* name;
    bool diversity, saliency, recycle, rectify;
    float eta;
  };
  for (const Row& r : {Row{"era", true, true, true, true, 0.4f}, Row{"dep-x", true, false, false, false, 0.0f},
                       Row{"dep-y", false, true, false, false, 0.4f}, Row{"dep", true, true, false, false, 0.4f},
                       Row{"dep+btr", true, true, true, false, 0.4f}}) {
    SCOPED_TRACE(r.name);
    const auto o = apply_era_variant(base, r.name);
    EXPECT_EQ(o.use_diversity, r.diversity);
    EXPECT_EQ(o.use_saliency, r.saliency);
    EXPECT_EQ(o.recycle, r.recycle);
    EXPECT_EQ(o.rectify, r.rectify);
    EXPECT_EQ(o.eta, r.eta);
    EXPECT_EQ(o.alpha, 0.9f);  // hyper-parameters other than eta stay as given
  }
  EXPECT_EQ(era_variant_names().size(), 5u);
  expect_invalid([&] { apply_era_variant(base, "dep+lar"); }, {"dep+lar", "dep-x", "dep+btr"});
}

TEST(EraOptions, LarLayerSchedules) {
  EraOptions o;
  EXPECT_EQ(lar_layer_scales(o, 4), (std::vector<float>{1, 1, 1, 1}));
  o.lar_schedule = LarSchedule::kEarlyLayers;
  o.lar_early_layers = 2;
  EXPECT_EQ(lar_layer_scales(o, 4), (std::vector<float>{1, 1, 0, 0}));
  o.lar_early_layers = 9;
  EXPECT_EQ(lar_layer_scales(o, 3), (std::vector<float>{1, 1, 1}));
  o.lar_schedule = LarSchedule::kLinearDecay;
  EXPECT_EQ(lar_layer_scales(o, 4), (std::vector<float>{1, 0.75f, 0.5f, 0.25f}));
  o.rectify = false;
  EXPECT_EQ(lar_layer_scales(o, 3), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(lar_layer_scales(o, 0).empty());
}

}  // namespace
}  // namespace era
