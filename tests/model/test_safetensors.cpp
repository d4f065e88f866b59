// era's own safetensors reader (src/model/safetensors.h): every value equals what the reference
// writers stored (the `safetensors` package and transformers' sharded save_pretrained on the PyPI
// route; tests/python/make_safetensors_refs.py), the mapping outlives its file object and is
// copy-on-write, and every malformed file is one kBundle error naming the file and the tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "era/error.h"
#include "model/safetensors.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string refs_dir() { return test::testdata_dir() + "/safetensors"; }

// torch's dtype names, as the fixture writes them ("bfloat16").
torch::ScalarType torch_dtype(const std::string& name) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"float64", torch::kDouble}, {"float32", torch::kFloat}, {"float16", torch::kHalf}, {"bfloat16", torch::kBFloat16},
      {"int64", torch::kLong},     {"int32", torch::kInt},     {"int16", torch::kShort},  {"int8", torch::kChar},
      {"uint8", torch::kByte},     {"bool", torch::kBool}};
  return types.at(name);
}

// Each tensor of `folder` against the values the fixture made.
void expect_values(const SafetensorsFolder& folder, const json& refs) {
  ASSERT_EQ(folder.names().size(), refs.size());
  for (const auto& [name, ref] : refs.items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(folder.has(name));
    const torch::Tensor t = folder.tensor(name);
    EXPECT_EQ(t.sizes().vec(), ref["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(t.scalar_type(), torch_dtype(ref["dtype"].get<std::string>()));
    const torch::Tensor flat = t.reshape(-1);
    const auto& expected = ref["values"];
    ASSERT_EQ(static_cast<size_t>(flat.numel()), expected.size());
    if (t.is_floating_point()) {
      const torch::Tensor got = flat.to(torch::kDouble).contiguous();
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_EQ(got[static_cast<int64_t>(i)].item<double>(), expected[i].get<double>());
    } else {
      const torch::Tensor got = flat.to(torch::kLong).contiguous();
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_EQ(got[static_cast<int64_t>(i)].item<int64_t>(), expected[i].get<int64_t>());
    }
  }
}

TEST(Safetensors, EveryDtypeEqualsWhatTheReferenceWriterStored) {
  const json refs = test::read_json(refs_dir() + "/values.json");
  std::cout << "single file written by " << refs["single"]["writer"] << "\n";
  const SafetensorsFolder folder(refs_dir() + "/single");
  expect_values(folder, refs["single"]["tensors"]);
  const auto file = SafetensorsFile::open(refs_dir() + "/single/model.safetensors");
  EXPECT_EQ(file->header().metadata.at("format"), "pt");
}

TEST(Safetensors, AShardedFolderReadsThroughItsIndex) {
  const json refs = test::read_json(refs_dir() + "/values.json");
  std::cout << "shards written by " << refs["sharded"]["writer"] << "\n";
  const SafetensorsFolder folder(refs_dir() + "/sharded");
  expect_values(folder, refs["sharded"]["tensors"]);
  // the index decides which shard holds a tensor
  const json index = test::read_json(refs_dir() + "/sharded/model.safetensors.index.json");
  for (const auto& [name, shard] : index["weight_map"].items())
    EXPECT_EQ(fs::path(folder.file_of(name)).filename().string(), shard.get<std::string>()) << name;
}

// A tensor is a view of the mapping: it stays valid after the file object is gone, and writing
// it changes this process's copy only.
TEST(Safetensors, ViewsOutliveTheFileAndWritesStayInTheProcess) {
  const std::string path = refs_dir() + "/single/model.safetensors";
  const std::string before = test::read_file(path);
  torch::Tensor t;
  {
    const auto file = SafetensorsFile::open(path);
    t = file->tensor("f32");
  }
  const double sum = t.sum().item<double>();
  t.add_(1.0);
  EXPECT_NEAR(t.sum().item<double>(), sum + static_cast<double>(t.numel()), 1e-4);  // float32 sums
  EXPECT_EQ(test::read_file(path), before);
  EXPECT_DOUBLE_EQ(SafetensorsFile::open(path)->tensor("f32").sum().item<double>(), sum);
}

// A file made by hand: the 8-byte little-endian header length, the header, the data.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string refusal_of(const std::string& bytes) {
  const std::string dir = test::scratch_dir_for_this_test();
  std::ofstream(dir + "/model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
  try {
    const SafetensorsFolder folder(dir);
    for (const std::string& name : folder.names()) folder.tensor(name);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find(dir + "/model.safetensors"), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(Safetensors, MalformedFilesAreOneErrorNamingTheFileAndTensor) {
  const std::string f32x2 = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(refusal_of(file_bytes(f32x2, std::string(8, '\0'))), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string(5, '\0'), "truncated: 5 bytes"},
      {file_bytes(f32x2, std::string(4, '\0')), "tensor 'w': data_offsets end at 8, past the file's 4 data bytes"},
      {file_bytes(f32x2, std::string(12, '\0')), "the tensors cover 8 of the file's 12 data bytes"},
      {file_bytes(f32x2, "").substr(0, 20), "truncated: the header is"},
      {file_bytes("[1, 2]", ""), "not a JSON object"},
      {file_bytes("{\"w\":", ""), "not JSON"},
      {file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
       "tensor 'w': data_offsets [0,8] hold 8 bytes, but F32 [3] needs 12"},
      {file_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0')),
       "tensor 'w': dtype F8_E4M3 is not one era reads"},
      {file_bytes(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
       "tensor 'w': shape [-1] must hold non-negative integers"},
      {file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
       "tensor 'w': data_offsets [4, 8] leave a hole"},
      {file_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           std::string(8, '\0')),
       "overlap"},
      {file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, '\0')), "end before they begin"},
      {file_bytes(R"({"w":{"dtype":"F32","shape":[1]}})", std::string(4, '\0')), "tensor 'w': data_offsets must be"},
      {file_bytes(R"({"__metadata__":{"k":5}})", ""), "__metadata__.k = 5: must be a string"},
  };
  for (const auto& [bytes, needle] : cases) {
    const std::string message = refusal_of(bytes);
    EXPECT_NE(message.find(needle), std::string::npos) << "expected '" << needle << "', got: " << message;
  }
  // a header length no file could hold is refused before anything is read
  std::string huge(8, '\0');
  huge[5] = 1;  // 2^40
  EXPECT_NE(refusal_of(huge + "{}").find("over the 100 MB limit"), std::string::npos);
}

// A sharded folder whose index and shards disagree: named by file and tensor.
TEST(Safetensors, ShardsMustMatchTheirIndex) {
  const std::string source = refs_dir() + "/sharded";
  const json index = test::read_json(source + "/model.safetensors.index.json");
  const auto copy = [&](const std::string& name) {
    const std::string dir = test::scratch_dir("safetensors_index/" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& entry : fs::directory_iterator(source))
      fs::copy_file(entry.path(), dir + "/" + entry.path().filename().string());
    return dir;
  };
  const auto refusal = [](const std::string& dir) -> std::string {
    try {
      SafetensorsFolder{dir};
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string first_tensor = index["weight_map"].begin().key();
  const std::string first_shard = index["weight_map"].begin().value();
  // A tensor the index can drop while its shard stays named: transformers may give one tensor
  // (lm_head) a shard of its own, and a shard the index no longer names is never opened.
  std::map<std::string, int> tensors_per_shard;
  for (const auto& [tensor, shard] : index["weight_map"].items()) ++tensors_per_shard[shard.get<std::string>()];
  std::string shared_tensor;
  for (const auto& [tensor, shard] : index["weight_map"].items())
    if (shared_tensor.empty() && tensors_per_shard[shard.get<std::string>()] > 1) shared_tensor = tensor;
  ASSERT_FALSE(shared_tensor.empty()) << "every shard of the fixture holds one tensor";

  const std::string missing = copy("missing_shard");
  fs::remove(missing + "/" + first_shard);
  EXPECT_NE(refusal(missing).find("names the shard " + first_shard + ", which is missing"), std::string::npos)
      << refusal(missing);

  const std::string renamed = copy("unknown_tensor");
  json edited = index;
  edited["weight_map"]["no.such.tensor"] = first_shard;
  test::write_file(renamed + "/model.safetensors.index.json", edited.dump());
  EXPECT_NE(refusal(renamed).find("has no tensor 'no.such.tensor'"), std::string::npos) << refusal(renamed);

  const std::string dropped = copy("unlisted_tensor");
  edited = index;
  edited["weight_map"].erase(shared_tensor);
  test::write_file(dropped + "/model.safetensors.index.json", edited.dump());
  EXPECT_NE(refusal(dropped).find("holds tensor '" + shared_tensor + "', which"), std::string::npos) << refusal(dropped);

  EXPECT_NE(refusal(test::scratch_dir("safetensors_index/empty")).find("no weights"), std::string::npos);
}

TEST(Safetensors, AShapeOtherThanTheConfigsIsNamed) {
  const SafetensorsFolder folder(refs_dir() + "/single");
  EXPECT_EQ(folder.tensor("f32", {2, 3, 4}).numel(), 24);
  try {
    folder.tensor("f32", {4, 3, 2});
    FAIL() << "a wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors: tensor 'f32' has shape [2, 3, 4], the config implies [4, 3, 2]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(folder.tensor("absent"), Error);
}

}  // namespace
}  // namespace era
