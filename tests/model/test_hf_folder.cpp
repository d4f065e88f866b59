// A Hugging Face folder opened directly, no export (model/hf_config.h, family/llava_hf_config.h,
// load_bundle over a folder): the manifest era builds from config.json, the processor and
// tokenizer files equals, field for field, the one tools/export_llava.py writes into a bundle of
// the same checkpoint; a Session over the folder answers as the bundle does; and every setting
// era cannot honour is refused naming the file and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bundle_session.h"
#include "era/era.h"
#include "era/error.h"
#include "family/model_family.h"
#include "model/hf_folder.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The sections a bundle's manifest and a folder's share (the header names the exporter, the
// torch and the module files, which a folder has none of).
void expect_same_sections(const json& got, const json& want, const std::string& skip = "") {
  for (const char* section : {"arch", "vision", "projector", "text", "tokens", "image", "prompt"}) {
    SCOPED_TRACE(section);
    if (!want.contains(section)) continue;
    ASSERT_TRUE(got.contains(section));
    json g = got[section], w = want[section];
    if (!skip.empty() && g.is_object()) {
      g.erase(skip);
      w.erase(skip);
    }
    EXPECT_EQ(g, w) << "folder: " << g.dump() << "\nbundle: " << w.dump();
  }
  EXPECT_EQ(got["files"]["tokenizer"], want["files"]["tokenizer"]);
}

json exported_manifest(const std::string& bundle) { return test::read_json(bundle + "/manifest.json"); }

TEST(HfFolder, TheNextManifestEqualsTheExportersFieldForField) {
  const std::string folder = test::testdata_dir() + "/tiny-llava-next";
  ASSERT_TRUE(is_hf_folder(folder));
  ASSERT_FALSE(is_hf_folder(test::next_bundle_dir()));
  expect_same_sections(manifest_from_hf_folder(folder), exported_manifest(test::next_bundle_dir()));
}

TEST(HfFolder, TheLlava15ManifestEqualsTheExportersButForItsImageMode) {
  // the suite's bundle was exported in LLaVA's own "pad" mode; the folder's CLIPImageProcessor crops
  const json got = manifest_from_hf_folder(test::checkpoint_dir());
  EXPECT_EQ(got["image"]["aspect_ratio"], "crop");
  expect_same_sections(got, exported_manifest(test::bundle_dir()), "aspect_ratio");
}

// Every transformers-made LLaVA-1.5 / NeXT checkpoint of the HF parity fixture (PyPI route).
TEST(HfFolder, EveryTransformersMadeLlavaCheckpointGivesTheExportersManifest) {
  const std::string hf = test::testdata_dir() + "/hf";
  if (!fs::exists(hf)) GTEST_SKIP() << "no HF parity data (ERA_HF_PARITY off)";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(hf)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("llava15_", 0) != 0 && name.rfind("next_", 0) != 0) continue;
    SCOPED_TRACE(name);
    const json c = test::read_json(entry.path().string() + "/case.json");
    json got = manifest_from_hf_folder(c["checkpoint"].get<std::string>());
    json want = exported_manifest(c["bundle"].get<std::string>());
    if (want["prompt"]["template"] == "chatml") {
      // exported with --template chatml (transformers' chat template); a folder gets the
      // exporter's default for ChatML checkpoints, LLaVA's evaluation template
      EXPECT_EQ(got["prompt"]["template"], "chatml_direct");
      got.erase("prompt");
      want.erase("prompt");
    }
    expect_same_sections(got, want);
    ++cases;
  }
  EXPECT_GE(cases, 8);
}

TEST(HfFolder, ASessionOverTheFolderAnswersAsTheBundle) {
  Session folder = Session::open(test::testdata_dir() + "/tiny-llava-next");
  Session bundle = Session::open(test::next_bundle_dir());
  const ModelInfo info = folder.info();
  EXPECT_EQ(info.arch, "llava-next");
  EXPECT_EQ(info.name, "tiny-llava-next");
  EXPECT_EQ(info.vision, "native");
  EXPECT_EQ(info.decoder, "native");
  for (const std::string method : {"full", "era", "divprune"}) {
    SCOPED_TRACE(method);
    Request r;
    r.images = {test::source_dir() + "/tests/data/sample.png"};
    r.prompt = "What is shown in this image?";
    r.max_new_tokens = 16;
    r.stop_at_eos = false;
    r.reduction.method = method;
    r.reduction.tokens = 160;
    const Result want = bundle.generate(r), got = folder.generate(r);
    EXPECT_EQ(got.stats.visual_tokens, want.stats.visual_tokens);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
  }
}

// A copy of the tiny NeXT folder with `edit` applied to one of its JSON files.
std::string edited_folder(const std::string& suffix, const std::string& file, const std::function<void(json&)>& edit) {
  const std::string dir = test::scratch_dir_for_this_test() + suffix;
  fs::remove_all(dir);
  fs::copy(test::testdata_dir() + "/tiny-llava-next", dir, fs::copy_options::recursive);
  json j = test::read_json(dir + "/" + file);
  edit(j);
  test::write_file(dir + "/" + file, j.dump(2));
  return dir;
}

TEST(HfFolder, WhatEraCannotHonourIsRefusedNamingTheFileAndTheField) {
  const auto has = [](const std::string& message, const std::string& needle) {
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  has(test::open_refusal(edited_folder("_type", "config.json", [](json& c) { c["model_type"] = "blip_2"; })),
      "config.json: model_type = \"blip_2\": not a model era runs (llava, llava_next, llava_onevision, qwen2_5_vl)");
  has(test::open_refusal(edited_folder("_onevision", "config.json", [](json& c) { c["model_type"] = "llava_onevision"; })),
      "era reads llava-onevision from an exported bundle only, so far");
  has(test::open_refusal(edited_folder("_original", "config.json", [](json& c) { c["model_type"] = "llava_llama"; })),
      "an original LLaVA repository checkpoint");
  has(test::open_refusal(edited_folder("_scaling", "config.json",
                                       [](json& c) {
                                         c["text_config"]["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
                                       })),
      "config.json: text_config: rope_scaling = ");
  has(test::open_refusal(edited_folder("_layer", "config.json", [](json& c) { c["vision_feature_layer"] = 99; })),
      "config.json: vision_feature_layer = 99: out of range");
  has(test::open_refusal(edited_folder("_setting", "preprocessor_config.json", [](json& c) { c["do_sharpen"] = true; })),
      "preprocessor_config.json: setting(s) do_sharpen not supported by era's image preprocessing");
  has(test::open_refusal(edited_folder("_resample", "preprocessor_config.json", [](json& c) { c["resample"] = 0; })),
      "preprocessor_config.json: resample = 0: not supported");
  has(test::open_refusal(edited_folder("_crop", "preprocessor_config.json", [](json& c) { c["crop_size"] = 224; })),
      "preprocessor_config.json: crop_size = 224: differs from the vision tower's image_size");
  // a missing shard of the weights: the file named
  const std::string no_weights = edited_folder("_weights", "config.json", [](json&) {});
  fs::remove(no_weights + "/model.safetensors");
  has(test::open_refusal(no_weights), "no weights: neither model.safetensors nor model.safetensors.index.json");
  const std::string no_tokenizer = edited_folder("_tokenizer", "config.json", [](json&) {});
  fs::remove(no_tokenizer + "/tokenizer.model");
  has(test::open_refusal(no_tokenizer), "tokenizer.model: not found (the SentencePiece model is required)");
}

}  // namespace
}  // namespace era
