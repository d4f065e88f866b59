// Adding a model family touches its own folder and the registry only (docs/architecture.md,
// "Adding a model family"): a stub family, written here as a new family would be in
// src/family/<name>/ and registered at run time instead of by a registry line, serves a bundle
// whose manifest names its arch through the whole pipeline, with no change anywhere else.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "era/era.h"
#include "family/llava_base.h"
#include "family/vision_input.h"
#include "model/bundle.h"
#include "model/manifest.h"
#include "reduce/budget.h"
#include "test_support.h"

namespace era {
namespace {

// LLaVA-1.5's behaviour under another name: one crop per image, the method on its 576 tokens.
class StubFamily : public LlavaFamilyBase {
 public:
  explicit StubFamily(const ModelBundle& bundle) : LlavaFamilyBase(bundle) {
    require_layout({ImageLayout::kPad, ImageLayout::kCrop});
  }
  std::string arch() const override { return "stub-llava"; }
  int64_t max_visual_tokens() const override { return tokens_per_crop(); }

 protected:
  std::vector<cv::Mat> crops(const cv::Mat& rgb) const override { return {llava15_crop(rgb, clip_)}; }
  ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec&, const Reducer& reducer,
                             const ReductionRequest& request) const override {
    ReductionInput input = crop_input(*image.vision, image.first, resolve_budget(request, tokens_per_crop(), request.tokens));
    input.instruction_embeddings = image.instruction;
    return reducer.reduce(input);
  }
};

int module_checks_run = 0;

TEST(StubFamily, ANewFamilyServesItsBundleWithNoChangeOutsideItsFolder) {
  register_model_family(
      "stub-llava", [](const ModelBundle& b) { return std::make_unique<StubFamily>(b); },
      [](const ModelBundle& b) {
        ++module_checks_run;
        check_llava_modules(b);
      });
  const std::string dir = test::scratch_dir("stub_family/bundle");
  std::filesystem::remove_all(dir);
  std::filesystem::copy(test::bundle_dir(), dir, std::filesystem::copy_options::recursive);
  auto manifest = nlohmann::json::parse(test::read_file(dir + "/manifest.json"));
  manifest["arch"] = "stub-llava";
  test::write_file(dir + "/manifest.json", manifest.dump(2));

  Request request;
  request.prompt = "What is in the image?";
  request.images = {test::source_dir() + "/tests/data/sample.jpg"};
  request.reduction.method = "era";
  request.reduction.tokens = 64;
  request.max_new_tokens = 8;
  Session original = Session::open(test::bundle_dir());
  Session stub = Session::open(dir);
  EXPECT_EQ(module_checks_run, 1);
  EXPECT_EQ(stub.info().arch, "stub-llava");
  const Result a = original.generate(request);
  const Result b = stub.generate(request);
  EXPECT_EQ(b.text, a.text);
  EXPECT_EQ(b.stats.visual_tokens, a.stats.visual_tokens);
  ASSERT_EQ(b.reductions.size(), 1u);
  EXPECT_EQ(b.reductions[0].kept, a.reductions[0].kept);

  EXPECT_THROW(register_model_family("stub-llava", [](const ModelBundle& b) { return std::make_unique<StubFamily>(b); }, {}),
               Error);
}

// A family with manifest fields of its own reads them itself (Manifest::fields()) through its
// registry line: the common manifest has no field of it, and a bad value is refused at load,
// naming the field, before any module is opened.
std::string stub_greeting(const Manifest& m) {
  const ManifestFields f = m.fields();
  const std::string greeting = f.text("stub.greeting");
  f.require(!greeting.empty(), "stub.greeting is empty");
  return greeting;
}

// The stub under another arch, with its own field.
class GreetingFamily final : public StubFamily {
 public:
  explicit GreetingFamily(const ModelBundle& bundle) : StubFamily(bundle), greeting_(stub_greeting(bundle.manifest)) {}
  std::string arch() const override { return "stub-greeting"; }
  const std::string& greeting() const { return greeting_; }

 private:
  std::string greeting_;
};

int greeting_module_checks = 0;

TEST(StubFamily, ItsOwnManifestFieldsAreItsOwnToRead) {
  register_model_family(
      "stub-greeting", [](const ModelBundle& b) { return std::make_unique<GreetingFamily>(b); },
      [](const ModelBundle& b) {
        ++greeting_module_checks;
        check_llava_modules(b);
      },
      {}, [](const Manifest& m) { stub_greeting(m); });
  const std::string dir = test::scratch_dir("stub_family/greeting");
  std::filesystem::remove_all(dir);
  std::filesystem::copy(test::bundle_dir(), dir, std::filesystem::copy_options::recursive);
  auto manifest = nlohmann::json::parse(test::read_file(dir + "/manifest.json"));
  manifest["arch"] = "stub-greeting";
  manifest["stub"] = {{"greeting", "hello"}};
  test::write_file(dir + "/manifest.json", manifest.dump(2));

  const ModelBundle bundle = load_bundle(dir, torch::kCPU, std::nullopt, {check_family_sections, check_family_modules});
  EXPECT_EQ(greeting_module_checks, 1);
  const auto family = make_model_family(bundle);
  EXPECT_EQ(dynamic_cast<const GreetingFamily&>(*family).greeting(), "hello");
  EXPECT_EQ(Session::open(dir).info().arch, "stub-greeting");
  EXPECT_EQ(greeting_module_checks, 2);

  manifest["stub"]["greeting"] = 5;
  test::write_file(dir + "/manifest.json", manifest.dump(2));
  try {
    Session::open(dir);
    ADD_FAILURE() << "a bad stub.greeting was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find("stub.greeting = 5: must be a string"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir + "/manifest.json"), std::string::npos) << e.what();
  }
  EXPECT_EQ(greeting_module_checks, 2);  // refused before the modules
}

}  // namespace
}  // namespace era
