// Which bundles a LibTorch can run, by the torch that exported them (model/export_compat.h):
// the rule with faked LibTorch versions, and the real loader and era_infer refusing an edited
// copy of the test bundle up front with one clear message instead of a TorchScript exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "model/bundle.h"
#include "model/export_compat.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;

Manifest exported_by(const std::string& torch, const std::string& attention) {
  Manifest m;
  m.exported_torch = torch;
  m.attention = attention;
  return m;
}

// The error check_export_compat throws ("" when it accepts).
std::string refusal(const Manifest& m, TorchVersion running) {
  try {
    check_export_compat(m, "/b/tiny", running);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    return e.what();
  }
  return "";
}

const TorchVersion kDebian{1, 13}, kPypi{2, 11};

TEST(ExportCompat, ParsesTorchVersionStrings) {
  const auto v = parse_torch_version("2.11.0+cu130");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->major, 2);
  EXPECT_EQ(v->minor, 11);
  const auto debian = parse_torch_version("1.13.0a0");
  ASSERT_TRUE(debian);
  EXPECT_EQ(debian->str(), "1.13");
  EXPECT_FALSE(parse_torch_version(""));
  EXPECT_FALSE(parse_torch_version("2"));
  EXPECT_FALSE(parse_torch_version("v2.11"));
  EXPECT_FALSE(parse_torch_version("2.x"));
}

TEST(ExportCompat, MeasuredPairsLoad) {
  // tools/README.md "Which bundle loads where": math bundles of 1.13 and 2.11 run on both
  for (const auto* torch : {"1.13.0a0", "2.11.0+cu130"}) {
    for (const auto running : {kDebian, kPypi}) EXPECT_EQ(refusal(exported_by(torch, "math"), running), "") << torch;
  }
  EXPECT_EQ(refusal(exported_by("2.11.0+cu130", "sdpa"), kPypi), "");
  // an older exporter than the runtime: TorchScript loads older files
  EXPECT_EQ(refusal(exported_by("2.0.1", "math"), kPypi), "");
}

TEST(ExportCompat, SdpaBundleRefusedOnLibTorchWithoutSdpa) {
  const std::string msg = refusal(exported_by("2.11.0+cu130", "sdpa"), kDebian);
  EXPECT_NE(msg.find("bundle /b/tiny"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exported_with.torch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2.11.0+cu130"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LibTorch 1.13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scaled_dot_product_attention"), std::string::npos) << msg;
  EXPECT_NE(msg.find("re-export it with --attention math"), std::string::npos) << msg;
}

TEST(ExportCompat, NewerUntestedExporterRefused) {
  for (const auto running : {kDebian, kPypi}) {
    const std::string msg = refusal(exported_by("2.15.0", "math"), running);
    EXPECT_NE(msg.find("exported with torch 2.15.0 (manifest exported_with.torch)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("newer than this build's LibTorch " + running.str()), std::string::npos) << msg;
    EXPECT_NE(msg.find("re-export it with torch 1.13.x or 2.11.x"), std::string::npos) << msg;
  }
  // the same file on a LibTorch at least as new is fine
  EXPECT_EQ(refusal(exported_by("2.15.0", "math"), TorchVersion{2, 15}), "");
}

TEST(ExportCompat, UnreadableVersionRefused) {
  const std::string msg = refusal(exported_by("nightly", "math"), kPypi);
  EXPECT_NE(msg.find("exported_with.torch is \"nightly\", not a torch version"), std::string::npos) << msg;
}

// ---- the real loader on an edited copy of the test bundle -------------------------------------

class EditedBundle : public ::testing::Test {
 protected:
  // A copy of the test bundle with its manifest edited by `change`.
  std::string copy_with(const std::string& name, const std::function<void(nlohmann::json&)>& change) {
    const std::string dir = test::scratch_dir("export_compat_" + name);
    for (const auto& entry : fs::directory_iterator(test::bundle_dir())) {
      fs::copy_file(entry.path(), fs::path(dir) / entry.path().filename());
    }
    std::ifstream in(dir + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    change(j);
    std::ofstream(dir + "/manifest.json") << j.dump(1);
    return dir;
  }
  std::string load_error(const std::string& dir) {
    try {
      load_bundle(dir, torch::kCPU);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBundle);
      return e.what();
    }
    return "";
  }
};

TEST_F(EditedBundle, ClaimingANewerTorchIsRefusedBeforeLoading) {
  const std::string dir = copy_with("newer", [](nlohmann::json& j) { j["exported_with"]["torch"] = "2.15.0"; });
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find("bundle " + dir +
                     ": exported with torch 2.15.0 (manifest exported_with.torch), newer than this build's LibTorch " +
                     libtorch_version().str()),
            std::string::npos)
      << msg;
  // the untouched copy loads: the manifest edit is what was refused
  EXPECT_EQ(load_error(copy_with("same", [](nlohmann::json&) {})), "");
}

TEST_F(EditedBundle, MissingExporterVersionNamed) {
  const std::string msg = load_error(copy_with("unversioned", [](nlohmann::json& j) { j["exported_with"].erase("torch"); }));
  EXPECT_NE(msg.find("missing field 'exported_with.torch'"), std::string::npos) << msg;
}

TEST_F(EditedBundle, EraInferRefusesWithTheMessageNotATorchScriptError) {
  const std::string dir = copy_with("cli", [](nlohmann::json& j) { j["exported_with"]["torch"] = "9.0.0"; });
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + test::source_dir() +
                                   "/tests/data/sample.png -p 'What is it?' -n 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("exported with torch 9.0.0 (manifest exported_with.torch)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal"), std::string::npos) << r.err;
}

TEST_F(EditedBundle, SdpaAttentionNeedsLibTorch21) {
  // The test bundle's decoder is whatever ERA_PYTHON exported; only the manifest claim is edited,
  // so on LibTorch >= 2.1 this must still load (the claim alone never refuses there).
  const std::string dir = copy_with("sdpa", [](nlohmann::json& j) {
    j["exported_with"]["attention"] = "sdpa";
    j["exported_with"]["torch"] = "2.11.0+cu130";
  });
  const std::string msg = load_error(dir);
  const auto running = libtorch_version();
  if (running.major > 2 || (running.major == 2 && running.minor >= 1)) {
    EXPECT_EQ(msg, "");
  } else {
    EXPECT_NE(msg.find("with --attention sdpa"), std::string::npos) << msg;
    EXPECT_NE(msg.find("LibTorch " + running.str()), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace era
