// era's own C++ vision towers and projectors (model/native_vision.h over layers/vit_tower.h, their
// weights read by family/llava_native_vision.h from the Hugging Face folder) against the
// TorchScript vision.pt and projector.pt exported from the same checkpoint: CLIP under "default"
// (tiny-llava-1.5, llava-hf's names), CLIP with anyres and image_newline (tiny-llava-next) and
// SigLIP under "full" (the tiny OneVision folder make_random_bundle.py writes under transformers
// 5's names). Every output the reduction methods read, in float32 and in bf16 with the CPU routing,
// and the Session end to end with no TorchScript module loaded at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bundle_session.h"
#include "era/era.h"
#include "era/error.h"
#include "era/methods.h"
#include "family/model_family.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/native_vision.h"
#include "model/safetensors.h"
#include "model/vision_encoder.h"
#include "parity_support.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using test::max_rel_error;

struct VisionCase {
  std::string bundle, weights;
};

VisionCase vision_case(const std::string& name) {
  if (name == "clip") return {test::bundle_dir(), test::checkpoint_dir()};
  if (name == "clip_anyres") return {test::next_bundle_dir(), test::testdata_dir() + "/tiny-llava-next"};
  if (name == "qwen") return {test::testdata_dir() + "/bundle-qwen2.5-vl", test::testdata_dir() + "/hf-qwen2.5-vl"};
  return {test::onevision_bundle_dir(), test::testdata_dir() + "/hf-llava-onevision"};
}

const FamilyChecks kNativeFamily{check_family_sections, check_family_modules, load_family_native_vision};

// The bundle's modules as they are, and a second load of it whose tower and projector are native.
struct BundlePair {
  explicit BundlePair(const VisionCase& c, std::optional<torch::ScalarType> dtype = std::nullopt)
      : scripted(load_bundle(c.bundle, torch::kCPU, dtype, kNativeFamily)),
        native(load_bundle(c.bundle, torch::kCPU, dtype, kNativeFamily, c.weights)) {
    apply_cpu_matmul(scripted, CpuMatmul::kAuto);
    apply_cpu_matmul(native, CpuMatmul::kAuto);
  }
  ModelBundle scripted, native;
};

void expect_same_outputs(const VisionOutput& got, const VisionOutput& want, double tolerance) {
  const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> outputs[] = {
      {"features", {got.features, want.features}},       {"cls_logits", {got.cls_logits, want.cls_logits}},
      {"cls_probs", {got.cls_probs, want.cls_probs}},    {"mean_logits", {got.mean_logits, want.mean_logits}},
      {"mean_probs", {got.mean_probs, want.mean_probs}}, {"cls_features", {got.cls_features, want.cls_features}},
      {"mean_keys", {got.mean_keys, want.mean_keys}},    {"embeddings", {got.embeddings, want.embeddings}}};
  for (const auto& [name, t] : outputs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(t.first.defined());
    ASSERT_EQ(t.first.sizes(), t.second.sizes());
    ASSERT_EQ(t.first.scalar_type(), t.second.scalar_type());
    if (t.second.numel() > 0) {
      EXPECT_LE(max_rel_error(t.first, t.second), tolerance);
    }
  }
}

class NativeVisionTower : public ::testing::TestWithParam<std::string> {
 protected:
  c10::InferenceMode inference_;
};

TEST_P(NativeVisionTower, EveryOutputEqualsTheTorchScriptTower) {
  BundlePair p(vision_case(GetParam()));
  VisionEncoder scripted(p.scripted), native(p.native);
  ASSERT_EQ(native.backend_name(), "native");
  ASSERT_EQ(scripted.backend_name(), "torchscript");
  EXPECT_TRUE(p.native.scripted_modules().empty());  // nothing of TorchScript was loaded
  const int64_t S = p.native.manifest.vision.image_size;
  torch::manual_seed(3);
  const torch::Tensor pixels = torch::randn({3, 3, S, S});
  const VisionOutput want = scripted.encode(pixels), got = native.encode(pixels);
  expect_same_outputs(got, want, 1e-5);
  // the projector alone, as BTR and the packers call it on a few rows
  const torch::Tensor rows = want.features[0].slice(0, 0, 5);
  EXPECT_LE(max_rel_error(got.project(rows), want.project(rows)), 1e-5);
  const torch::Tensor newline_want = projector_parameter(p.scripted, "image_newline");
  const torch::Tensor newline_got = projector_parameter(p.native, "image_newline");
  ASSERT_EQ(newline_got.defined(), newline_want.defined());
  if (newline_want.defined()) {
    EXPECT_TRUE(torch::equal(newline_got, newline_want));
  }
}

// bf16 with the runtime's CPU routing (widened products where this CPU lacks bf16 arithmetic,
// era::widened_attention's per-head kernel where it has it without AMX, float32 layer norms on
// LibTorch 1.13): the same kernels in the same order as the exported modules after
// apply_cpu_matmul, so the same roundings.
TEST_P(NativeVisionTower, Bfloat16WithTheCpuRoutingEqualsTheTorchScriptTower) {
  BundlePair p(vision_case(GetParam()), torch::kBFloat16);
  VisionEncoder scripted(p.scripted), native(p.native);
  const int64_t S = p.native.manifest.vision.image_size;
  torch::manual_seed(4);
  const torch::Tensor pixels = torch::randn({2, 3, S, S});
  expect_same_outputs(native.encode(pixels), scripted.encode(pixels), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, NativeVisionTower, ::testing::Values("clip", "clip_anyres", "siglip"),
                         [](const auto& info) { return info.param; });

// Qwen2.5-VL's native-resolution tower over patches of three items: two images whose grids leave
// partial and padded windows, and a two-slice video of 2 x 3 windows (the exporter's probe grids).
void expect_qwen_tower_parity(std::optional<torch::ScalarType> dtype) {
  c10::InferenceMode inference;
  BundlePair p(vision_case("qwen"), dtype);
  VisionEncoder scripted(p.scripted), native(p.native);
  ASSERT_EQ(native.backend_name(), "native");
  EXPECT_TRUE(p.native.scripted_modules().empty());
  const auto& v = p.native.manifest.vision;
  const torch::Tensor grid = torch::tensor({1, 4, 6, 1, 8, 4, 2, 10, 18}, torch::kLong).reshape({3, 3});
  const int64_t patches = (grid.select(1, 0) * grid.select(1, 1) * grid.select(1, 2)).sum().item<int64_t>();
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({patches, 3 * 2 * v.patch_size * v.patch_size});
  const VisionOutput want = scripted.encode_native(x, grid), got = native.encode_native(x, grid);
  expect_same_outputs(got, want, 1e-5);
  EXPECT_THROW(native.encode(torch::zeros({1, 3, v.image_size, v.image_size})), Error);
}

TEST(NativeQwenTower, EveryOutputEqualsTheTorchScriptTower) { expect_qwen_tower_parity(std::nullopt); }
TEST(NativeQwenTower, Bfloat16WithTheCpuRoutingEqualsTheTorchScriptTower) { expect_qwen_tower_parity(torch::kBFloat16); }

// The whole request through a Session, for every entry of the method registry (ERA, its
// ablations, every competitor) on every LLaVA family: the same kept tokens, LAR biases and answer
// with the bundle's TorchScript modules as with era's native models over the HF folder.
Session& backend_session(const std::string& family, bool native) {
  static std::map<std::pair<std::string, bool>, Session> sessions;
  const auto key = std::make_pair(family, native);
  auto it = sessions.find(key);
  if (it == sessions.end()) {
    const VisionCase c = vision_case(family);
    SessionOptions options;
    if (native) options.hf_weights = c.weights;
    it = sessions.emplace(key, Session::open(c.bundle, options)).first;
  }
  return it->second;
}

class BothBackends : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(BothBackends, KeepTheSameTokensAndGiveTheSameAnswer) {
  const auto& [family, method] = GetParam();
  Session& scripted = backend_session(family, false);
  Session& native = backend_session(family, true);
  ASSERT_EQ(native.info().vision, "native");
  ASSERT_EQ(native.info().decoder, "native");
  ASSERT_EQ(scripted.info().vision, "torchscript");
  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "What is shown in this image?";
  r.max_new_tokens = 8;
  r.stop_at_eos = false;
  r.reduction.method = method;
  r.reduction.tokens = family == "clip" ? 64 : family == "qwen" ? 16 : 160;
  r.reduction.baselines.fastv_layer = r.reduction.baselines.dart_layer = 1;  // the tiny decoders have 2 layers
  // refused by name on both: VisionZip ranks by a CLS token (SigLIP and Qwen2.5-VL's tower have
  // none), pool needs a square grid
  if ((family == "siglip" || family == "qwen") && method == "visionzip") return;
  if (family == "qwen" && method == "pool") return;
  const Result want = scripted.generate(r), got = native.generate(r);
  ASSERT_EQ(got.reductions.size(), want.reductions.size());
  for (size_t i = 0; i < want.reductions.size(); ++i) {
    EXPECT_EQ(got.reductions[i].kept, want.reductions[i].kept);
    EXPECT_EQ(got.reductions[i].assignment, want.reductions[i].assignment);
    ASSERT_EQ(got.reductions[i].bias.size(), want.reductions[i].bias.size());
    for (size_t k = 0; k < want.reductions[i].bias.size(); ++k)
      EXPECT_NEAR(got.reductions[i].bias[k], want.reductions[i].bias[k], 1e-5f * std::abs(want.reductions[i].bias[k]));
  }
  EXPECT_EQ(got.stats.visual_tokens, want.stats.visual_tokens);
  EXPECT_EQ(got.tokens, want.tokens);
}

std::vector<std::tuple<std::string, std::string>> family_method_pairs() {
  std::vector<std::tuple<std::string, std::string>> pairs;
  for (const std::string family : {"clip", "clip_anyres", "siglip", "qwen"})
    for (const MethodInfo& m : available_methods()) pairs.emplace_back(family, m.name);
  return pairs;
}

INSTANTIATE_TEST_SUITE_P(Registry, BothBackends, ::testing::ValuesIn(family_method_pairs()), [](const auto& info) {
  std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
});

// `tensors` as one float32 model.safetensors (the format's layout: 8-byte header length, JSON
// header, data in header order).
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const torch::Tensor f = t.to(torch::kFloat).contiguous();
    const auto* bytes = static_cast<const char*>(f.data_ptr());
    header[name] = {
        {"dtype", "F32"}, {"shape", f.sizes().vec()}, {"data_offsets", {data.size(), data.size() + f.numel() * sizeof(float)}}};
    data.append(bytes, static_cast<size_t>(f.numel()) * sizeof(float));
  }
  const std::string text = header.dump();
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out << text << data;
}

TEST(NativeModelsSession, ATowerOfAnotherKindOrShapeOrWithoutATensorIsRefusedNamingIt) {
  const VisionCase clip = vision_case("clip"), siglip = vision_case("siglip");
  const SafetensorsFolder folder(clip.weights);
  std::map<std::string, torch::Tensor> tensors;
  for (const std::string& name : folder.names()) tensors[name] = folder.tensor(name);
  // the tower's names as this checkpoint spells them (llava-hf's, or transformers 5's on the PyPI route)
  std::string tower;
  for (const auto& [name, t] : tensors) {
    const auto at = name.find("encoder.layers.0.mlp.fc1.weight");
    if (name.find("vision_tower") != std::string::npos && at != std::string::npos) tower = name.substr(0, at);
  }
  ASSERT_FALSE(tower.empty()) << "no vision tower in " << clip.weights;
  const std::string fc1 = tower + "encoder.layers.0.mlp.fc1.weight";
  const std::string q_bias = tower + "encoder.layers.0.self_attn.q_proj.bias";
  ASSERT_TRUE(tensors.count(q_bias));
  const auto folder_with = [&](const std::string& suffix, const std::map<std::string, torch::Tensor>& weights,
                               const std::string& config) {
    const std::string dir = test::scratch_dir_for_this_test() + suffix;
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_safetensors(dir + "/model.safetensors", weights);
    fs::copy_file(config + "/config.json", dir + "/config.json");
    return dir;
  };
  // the CLIP checkpoint's weights under the SigLIP folder's config.json: refused before any tensor is read
  const std::string kind = test::open_refusal(clip.bundle, folder_with("_kind", tensors, siglip.weights));
  EXPECT_NE(kind.find("config.json: vision_config.model_type = \"siglip_vision_model\""), std::string::npos) << kind;
  // one tower tensor of another shape
  std::map<std::string, torch::Tensor> wide = tensors;
  wide[fc1] = torch::zeros({tensors[fc1].size(0) + 1, tensors[fc1].size(1)});
  const std::string shape = test::open_refusal(clip.bundle, folder_with("_shape", wide, clip.weights));
  EXPECT_NE(shape.find("model.safetensors: tensor '" + fc1 + "' has shape"), std::string::npos) << shape;
  // one missing
  std::map<std::string, torch::Tensor> missing = tensors;
  missing.erase(q_bias);
  const std::string gone = test::open_refusal(clip.bundle, folder_with("_missing", missing, clip.weights));
  EXPECT_NE(gone.find("no tensor '" + q_bias + "'"), std::string::npos) << gone;
}

TEST(NativeModelsSession, AnInt8BundleWithHfWeightsIsRefusedNamingTheField) {
  const std::string msg = test::open_refusal(test::testdata_dir() + "/bundle-int8", test::checkpoint_dir());
  EXPECT_NE(msg.find("manifest.json: quantization.int8 = \"decoder\""), std::string::npos) << msg;
}

}  // namespace
}  // namespace era
