// A bundle is validated completely when it loads (model/manifest.cpp, model/bundle.cpp): each
// case copies the tiny bundle, breaks one thing, and the load must fail with ErrorCode::kBundle
// and a message naming the field and the value, before any request is made. Covers the classes
// a hostile run found (negative or absurd sizes, heads that do not match the modules, std of 0,
// ids outside the vocabulary, empty file names, a FIFO tokenizer) and their relatives.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "era/era.h"
#include "era/error.h"
#include "model/manifest.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A copy of the tiny LLaVA-1.5 bundle with its manifest as JSON to edit.
struct BundleCopy {
  std::string dir;
  json manifest;
  explicit BundleCopy(const std::string& name, const std::string& from = test::bundle_dir()) {
    dir = test::scratch_dir("bundle_validation/" + name);
    fs::copy(from, dir, fs::copy_options::recursive);
    manifest = json::parse(test::read_file(dir + "/manifest.json"));
  }
  void save() const { test::write_file(dir + "/manifest.json", manifest.dump(2)); }
};

// Opening must fail with kBundle; returns the message.
std::string refusal(const std::string& dir) {
  try {
    Session::open(dir);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "bundle " << dir << " was accepted";
  return "";
}

struct ManifestCase {
  const char* name;
  std::function<void(json&)> edit;
  std::vector<std::string> message;  // substrings the one error line must hold
};

const std::vector<ManifestCase>& manifest_cases() {
  static const std::vector<ManifestCase> cases = {
      {"negative_layers", [](json& m) { m["text"]["num_layers"] = -3; }, {"text.num_layers = -3", "from 1 to 1024"}},
      {"huge_layers", [](json& m) { m["text"]["num_layers"] = int64_t{1} << 62; }, {"text.num_layers = 4611686018427387904"}},
      {"float_for_int", [](json& m) { m["text"]["hidden_size"] = 128.0; }, {"text.hidden_size = 128.0", "integer"}},
      {"float_overflow", [](json& m) { m["vision"]["hidden_size"] = 1e30; }, {"vision.hidden_size = 1e+30"}},
      {"bool_for_int", [](json& m) { m["text"]["num_heads"] = true; }, {"text.num_heads = true"}},
      {"string_for_int", [](json& m) { m["text"]["vocab_size"] = "1024"; }, {"text.vocab_size = \"1024\""}},
      {"unsigned_beyond_int64",
       [](json& m) { m["text"]["vocab_size"] = uint64_t{18446744073709551615ull}; },
       {"text.vocab_size = 18446744073709551615"}},
      {"negative_context",
       [](json& m) { m["text"]["max_position_embeddings"] = -10; },
       {"text.max_position_embeddings = -10", "from 2 to"}},
      {"absurd_cache_head_dim",
       [](json& m) { m["text"]["cache_head_dim"] = int64_t{1} << 40; },
       {"text.cache_head_dim = 1099511627776", "from 33 to 96"}},
      {"cache_head_dim_not_multiple_of_8",
       [](json& m) { m["text"]["cache_head_dim"] = 36; },
       {"text.cache_head_dim = 36", "multiple of 8"}},
      {"heads_times_head_dim",
       [](json& m) { m["text"]["head_dim"] = 16; },
       {"text.head_dim = 16", "num_heads x text.head_dim must equal text.hidden_size 128"}},
      {"kv_heads_do_not_divide", [](json& m) { m["text"]["num_kv_heads"] = 3; }, {"text.num_kv_heads = 3", "divide"}},
      {"kv_heads_above_heads", [](json& m) { m["text"]["num_kv_heads"] = 8; }, {"text.num_kv_heads = 8", "from 1 to 4"}},
      {"vision_heads_do_not_divide", [](json& m) { m["vision"]["num_heads"] = 5; }, {"vision.num_heads = 5", "divide"}},
      {"feature_layer_outside",
       [](json& m) { m["vision"]["feature_layer"] = -9; },
       {"vision.feature_layer = -9", "from -5 to 4"}},
      {"layers_run_beyond", [](json& m) { m["vision"]["layers_run"] = 7; }, {"vision.layers_run = 7", "from 1 to 4"}},
      {"bos_outside_vocabulary", [](json& m) { m["tokens"]["bos_id"] = 5000; }, {"tokens.bos_id = 5000", "from -1 to 1023"}},
      {"has_cls_not_boolean", [](json& m) { m["vision"]["has_cls"] = "no"; }, {"vision.has_cls must be true or false"}},
      // CLIP's patch size must divide its image size (only SigLIP, has_cls false, drops a remainder)
      {"clip_patch_does_not_divide", [](json& m) { m["vision"]["patch_size"] = 13; }, {"vision.patch_size = 13", "divide"}},
      {"eos_negative", [](json& m) { m["tokens"]["eos_id"] = -1; }, {"tokens.eos_id = -1"}},
      {"pad_outside", [](json& m) { m["tokens"]["pad_id"] = 1024; }, {"tokens.pad_id = 1024", "from -1 to 1023"}},
      {"stop_id_outside",
       [](json& m) {
         m["tokens"]["stop_ids"] = {2, 99999};
       },
       {"tokens.stop_ids[1] = 99999"}},
      {"tokenizer_vocab_beyond_vocab",
       [](json& m) { m["tokens"]["tokenizer_vocab_size"] = 2048; },
       {"tokens.tokenizer_vocab_size = 2048"}},
      {"std_zero", [](json& m) { m["image"]["std"][1] = 0.0; }, {"image.std[1] = 0.0", "at least 1e-6"}},
      {"std_as_string", [](json& m) { m["image"]["std"][0] = "NaN"; }, {"image.std[0] = \"NaN\"", "number"}},
      {"mean_not_three",
       [](json& m) {
         m["image"]["mean"] = {0.5, 0.5};
       },
       {"image.mean = [0.5,0.5]", "3 numbers"}},
      {"pad_color_wraps", [](json& m) { m["image"]["pad_color"][0] = 300; }, {"image.pad_color[0] = 300", "from 0 to 255"}},
      {"image_size_absurd",
       [](json& m) { m["vision"]["image_size"] = 1 << 20; },
       {"vision.image_size = 1048576", "from 1 to 4096"}},
      {"empty_decoder_file", [](json& m) { m["files"]["decoder"] = ""; }, {"files.decoder = \"\"", "must name a file"}},
      {"decoder_file_outside",
       [](json& m) { m["files"]["decoder"] = "../bundle-llava-1.5/decoder.pt"; },
       {"files.decoder = \"../bundle-llava-1.5/decoder.pt\"", "must not leave the bundle folder"}},
      {"decoder_file_absolute",
       [](json& m) { m["files"]["decoder"] = "/etc/passwd"; },
       {"files.decoder = \"/etc/passwd\"", "relative"}},
      {"decoder_file_is_a_folder",
       [](json& m) { m["files"]["decoder"] = "."; },
       {"files.decoder = \".\"", "is a directory, not a file"}},
      {"missing_module", [](json& m) { m["files"]["vision"] = "nope.pt"; }, {"files.vision = \"nope.pt\"", "nope.pt"}},
      {"format_version", [](json& m) { m["format_version"] = 2; }, {"format_version = 2", "from 1 to 1"}},
      {"not_an_object", [](json& m) { m["vision"] = 5; }, {"missing field 'vision.image_size'"}},
      {"int8_scope_unknown",
       [](json& m) { m["quantization"]["int8"] = "projector"; },
       {"quantization.int8 = \"projector\"", "\"decoder\" or \"all\""}},
      {"int8_scheme_unknown",
       [](json& m) {
         m["quantization"]["int8"] = "decoder";
         m["quantization"]["int8_scheme"] = "int4";
       },
       {"quantization.int8_scheme = \"int4\"", "\"weight-only\" or \"dynamic\""}},
  };
  return cases;
}

class BadManifest : public ::testing::TestWithParam<size_t> {};

TEST_P(BadManifest, IsRefusedWhenTheBundleLoadsNamingFieldAndValue) {
  const ManifestCase& c = manifest_cases()[GetParam()];
  BundleCopy b(c.name);
  c.edit(b.manifest);
  b.save();
  const std::string message = refusal(b.dir);
  EXPECT_NE(message.find(b.dir), std::string::npos) << "the bundle is not named: " << message;
  for (const auto& part : c.message) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

INSTANTIATE_TEST_SUITE_P(Cases, BadManifest, ::testing::Range<size_t>(0, manifest_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::string(manifest_cases()[info.param].name);
                         });

// The untouched copy loads: the cases above fail for their edit, not for being copies.
TEST(BundleValidation, TheUneditedCopyLoads) {
  BundleCopy b("unedited");
  b.save();
  EXPECT_NO_THROW(Session::open(b.dir));
}

// A manifest whose numbers agree with each other but not with the modules: 2 KV heads divide the
// 4 query heads, but the decoder's k_proj has 4 x 32 rows, not 2 x 32.
TEST(BundleValidation, HeadsThatDoNotMatchTheModulesAreRefused) {
  BundleCopy b("heads_vs_modules");
  b.manifest["text"]["num_kv_heads"] = 2;
  b.save();
  const std::string message = refusal(b.dir);
  EXPECT_NE(message.find("layers.0.self_attn.k_proj.weight' has shape [128, 128] but the manifest implies [64, 128]"),
            std::string::npos)
      << message;
}

TEST(BundleValidation, AnMlpWidthThatDoesNotMatchIsRefused) {
  BundleCopy b("mlp_vs_modules");
  b.manifest["text"]["intermediate_size"] = 512;
  b.save();
  EXPECT_NE(refusal(b.dir).find("mlp.gate_proj.weight' has shape [256, 128] but the manifest implies [512, 128]"),
            std::string::npos);
}

// A manifest whose numbers agree with each other and with every weight shape, but not with the
// values the modules were exported with: heads split another way (num_heads x head_dim, and
// num_kv_heads x head_dim, keep their products), a RoPE base, a cache width, a vision window.
// Such a bundle used to load, then fail every request inside TorchScript (exit 3).
struct LayoutCase {
  const char* name;
  std::function<std::string()> bundle;
  std::function<void(json&)> edit;
  std::string message;
};

TEST(BundleValidation, ValuesBakedIntoTheModulesMustMatchTheManifest) {
  const auto qwen = [] { return test::testdata_dir() + "/bundle-qwen2.5-vl"; };
  const std::vector<LayoutCase> cases = {
      // LLaVA-1.5 (LLaMA, 4 heads of 32): 8 heads of 16
      {"llava_heads", test::bundle_dir,
       [](json& m) {
         m["text"]["num_heads"] = 8;
         m["text"]["num_kv_heads"] = 8;
         m["text"]["head_dim"] = 16;
       },
       "manifest.json: text.num_heads = 8 but decoder.pt's layers.0.self_attn.num_heads is 4"},
      // OneVision (Qwen2, GQA: 4 query heads of 32, 2 KV heads): 8 and 4 heads of 16
      {"onevision_heads", test::onevision_bundle_dir,
       [](json& m) {
         m["text"]["num_heads"] = 8;
         m["text"]["num_kv_heads"] = 4;
         m["text"]["head_dim"] = 16;
       },
       "manifest.json: text.num_heads = 8 but decoder.pt's layers.0.self_attn.num_heads is 4"},
      // the KV cache's head width (head_dim + the LAR channel, padded): era allocates the cache with it
      {"cache_head_dim", test::bundle_dir, [](json& m) { m["text"]["cache_head_dim"] = 48; },
       "manifest.json: text.cache_head_dim = 48 but decoder.pt's layers.0.self_attn.cache_head_dim is 40"},
      // Qwen2.5-VL (4 heads of 16, 2 KV heads, M-RoPE [2, 3, 3]): 8 and 4 heads of 8, M-RoPE [1, 1, 2]
      {"qwen_heads", qwen,
       [](json& m) {
         m["text"]["num_heads"] = 8;
         m["text"]["num_kv_heads"] = 4;
         m["text"]["head_dim"] = 8;
         m["text"]["cache_head_dim"] = 16;
         m["text"]["mrope_section"] = {1, 1, 2};
       },
       "manifest.json: text.num_heads = 8 but decoder.pt's layers.0.self_attn.num_heads is 4"},
      {"qwen_mrope", qwen,
       [](json& m) {
         m["text"]["mrope_section"] = {2, 2, 4};
       },
       "manifest.json: text.mrope_section = [2, 2, 4] but decoder.pt's mrope_section is [2, 3, 3]"},
      {"rope_theta", test::bundle_dir, [](json& m) { m["text"]["rope_theta"] = 500000.0; },
       "manifest.json: text.rope_theta = 500000 but decoder.pt's rope_theta is 10000"},
      {"rms_norm_eps", test::onevision_bundle_dir, [](json& m) { m["text"]["rms_norm_eps"] = 1e-5; },
       "manifest.json: text.rms_norm_eps = 1e-05 but decoder.pt's layers.0.input_layernorm.eps is 1e-06"},
      // vision towers: CLIP (4 heads of 16 -> 8 of 8), SigLIP, Qwen2.5-VL's
      {"clip_heads", test::bundle_dir, [](json& m) { m["vision"]["num_heads"] = 8; },
       "manifest.json: vision.num_heads = 8 but vision.pt's encoder.layers.0.self_attn.num_heads is 4"},
      {"siglip_heads", test::onevision_bundle_dir, [](json& m) { m["vision"]["num_heads"] = 2; },
       "manifest.json: vision.num_heads = 2 but vision.pt's encoder.layers.0.self_attn.num_heads is 4"},
      {"qwen_vision_heads", qwen, [](json& m) { m["vision"]["num_heads"] = 4; },
       "manifest.json: vision.num_heads = 4 but vision.pt's num_heads is 2"},
      {"qwen_window", qwen, [](json& m) { m["vision"]["window_size"] = 224; },
       "manifest.json: vision.window_size 224 / spatial_merge_size / patch_size = 8 but vision.pt's window_units is 4"},
      {"qwen_full_attention", qwen,
       [](json& m) {
         m["vision"]["fullatt_block_indexes"] = {0, 2};
       },
       "manifest.json: vision.fullatt_block_indexes = [0, 2] but vision.pt's full_attention (true at) is [1, 3]"},
      {"feature_layers", test::bundle_dir,
       [](json& m) {
         m["vision"]["feature_layers"] = {-3};
         m["vision"]["feature_layer"] = -3;
       },
       "vision.feature_layers [-3] as hidden_states indices = [2] but vision.pt's encoder.feature_indices is [3]"},
      {"select_strategy", test::bundle_dir, [](json& m) { m["vision"]["select_strategy"] = "full"; },
       "vision.select_strategy \"full\" as the first feature token = 0 but vision.pt's first_token is 1"},
  };
  for (const LayoutCase& c : cases) {
    BundleCopy b(std::string("layout_") + c.name, c.bundle());
    c.edit(b.manifest);
    b.save();
    const std::string message = refusal(b.dir);
    EXPECT_NE(message.find(c.message), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(b.dir), std::string::npos) << c.name << ": " << message;
  }
}

// Every fixture bundle, as exported, passes those checks.
TEST(BundleValidation, EveryFixtureBundleLoads) {
  for (const std::string name : {"bundle-llava-1.5", "bundle-llava-next", "bundle-llava-onevision", "bundle-qwen2.5-vl",
                                 "bundle-int8", "bundle-int8-dynamic", "bundle-other"}) {
    EXPECT_NO_THROW(Session::open(test::testdata_dir() + "/" + name)) << name;
  }
}

// A tokenizer.model that is a FIFO: SentencePiece would wait for a writer forever.
TEST(BundleValidation, AFifoTokenizerIsRefusedWithoutBlocking) {
  BundleCopy b("fifo_tokenizer");
  fs::remove(b.dir + "/tokenizer.model");
  ASSERT_EQ(::mkfifo((b.dir + "/tokenizer.model").c_str(), 0644), 0);
  auto opened = std::async(std::launch::async, [&] { return refusal(b.dir); });
  ASSERT_EQ(opened.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the load blocked on the FIFO";
  const std::string message = opened.get();
  EXPECT_NE(message.find("files.tokenizer = \"tokenizer.model\""), std::string::npos) << message;
  EXPECT_NE(message.find("is a FIFO (named pipe), not a file"), std::string::npos) << message;
}

// A module file that is a symbolic link to a file outside the bundle folder.
TEST(BundleValidation, ASymlinkLeavingTheBundleIsRefused) {
  BundleCopy b("symlink_outside");
  const std::string outside = test::scratch_dir("bundle_validation/outside") + "/decoder.pt";
  fs::copy_file(b.dir + "/decoder.pt", outside);
  fs::remove(b.dir + "/decoder.pt");
  fs::create_symlink(outside, b.dir + "/decoder.pt");
  const std::string message = refusal(b.dir);
  EXPECT_NE(message.find("files.decoder"), std::string::npos) << message;
  EXPECT_NE(message.find("outside the bundle folder"), std::string::npos) << message;
}

// Same for a LLaVA-NeXT bundle's pinpoints: a count or a side no real checkpoint has.
TEST(BundleValidation, AbsurdPinpointsAreRefused) {
  for (const auto& [pinpoints, needle] :
       std::vector<std::pair<json, std::string>>{{json::array({{672, 1 << 30}}), "image.grid_pinpoints[0][1] = 1073741824"},
                                                 {json::array({{672, 500}}), "image.grid_pinpoints[0] = [672,500]"},
                                                 {json(std::vector<std::array<int, 2>>(65, {336, 336})), "1 to 64"}}) {
    BundleCopy b("pinpoints", test::next_bundle_dir());
    b.manifest["image"]["grid_pinpoints"] = pinpoints;
    b.save();
    EXPECT_NE(refusal(b.dir).find(needle), std::string::npos) << needle;
  }
}

// The parser alone (what the fuzz target drives): anything that is not a manifest is one kBundle error.
TEST(BundleValidation, ParseManifestRefusesNonManifestsWithOneError) {
  for (const std::string text : {"", "[]", "{", "null", "{\"format\": \"era-bundle\"}", "{\"format\": 5}",
                                 "{\"format\": \"era-bundle\", \"format_version\": 1e400}"}) {
    try {
      parse_manifest(text, "bundle <mem>");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBundle);
      EXPECT_EQ(std::string(e.what()).rfind("bundle <mem>: ", 0), 0u) << e.what();
    }
  }
}

// The CLI: one line naming the bundle, exit 2, no answer.
TEST(BundleValidation, EraInferExitsTwoWithOneLine) {
  BundleCopy b("cli");
  b.manifest["tokens"]["bos_id"] = 99999;
  b.save();
  const auto r = test::run_command(test::era_infer_path() + " -m " + b.dir + " -p hi -n 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.rfind("era_infer: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("tokens.bos_id = 99999"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace era
