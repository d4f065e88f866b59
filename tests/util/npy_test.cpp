// .npy reader/writer: files written by numpy (v1.0 and v2.0) and byte-exact round trips.
#include "util/npy.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "era/error.h"
#include "image/image_test_util.h"

namespace era {
namespace {

using test::image_manifest;
using test::image_path;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/era_npy_" + std::to_string(::getpid()) + "_" + name;
}

torch::ScalarType dtype_from_numpy(const std::string& s) {
  if (s == "float32") return torch::kFloat32;
  if (s == "float64") return torch::kFloat64;
  if (s == "int64") return torch::kInt64;
  if (s == "int32") return torch::kInt32;
  if (s == "uint8") return torch::kUInt8;
  ADD_FAILURE() << "unknown dtype " << s;
  return torch::kFloat32;
}

TEST(NpyTest, ReadsNumpyFilesAndRewritesThemByteForByte) {
  ERA_REQUIRE_IMAGE_FIXTURE();
  const auto& cases = image_manifest()["npy"];
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string path = image_path(c["file"]);
    SCOPED_TRACE(path);
    const torch::Tensor t = read_npy(path);
    EXPECT_EQ(t.scalar_type(), dtype_from_numpy(c["dtype"]));
    EXPECT_EQ(t.sizes().vec(), c["shape"].get<std::vector<int64_t>>());
    EXPECT_DOUBLE_EQ(t.to(torch::kFloat64).sum().item<double>(), c["sum"].get<double>());
    if (t.numel()) {
      EXPECT_DOUBLE_EQ(t.reshape({-1})[0].to(torch::kFloat64).item<double>(), c["first"].get<double>());
    }
    const std::string out = tmp_path("rewrite.npy");
    write_npy(out, t);
    const torch::Tensor back = read_npy(out);
    EXPECT_TRUE(torch::equal(back, t));
    EXPECT_EQ(back.sizes(), t.sizes());
    // Version-1 files: our writer produces numpy's exact bytes (header text and padding included).
    if (c["version"].get<int>() == 1) {
      EXPECT_EQ(slurp(out), slurp(path));
    }
    std::remove(out.c_str());
  }
}

TEST(NpyTest, RoundTripsEveryDtype) {
  const std::string out = tmp_path("rt.npy");
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32, torch::kUInt8}) {
    SCOPED_TRACE(c10::toString(dtype));
    const torch::Tensor t = (torch::arange(0, 60).reshape({3, 4, 5}) * 3 - 7).to(dtype);
    // Non-contiguous input is written in logical (C) order.
    const torch::Tensor nc = t.transpose(0, 2);
    write_npy(out, nc);
    const torch::Tensor back = read_npy(out);
    EXPECT_EQ(back.scalar_type(), dtype);
    EXPECT_EQ(back.sizes(), nc.sizes());
    EXPECT_TRUE(torch::equal(back, nc));
  }
  write_npy(out, torch::tensor(3.5));
  EXPECT_EQ(read_npy(out).dim(), 0);
  EXPECT_EQ(read_npy(out).item<double>(), 3.5);
  std::remove(out.c_str());
}

TEST(NpyTest, ErrorsNameTheFile) {
  const std::string bad = tmp_path("bad.npy");
  {
    std::ofstream f(bad, std::ios::binary);
    f << "not an npy file";
  }
  for (const std::string& path : {bad, tmp_path("missing.npy")}) {
    try {
      read_npy(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // A truncated data section.
  write_npy(bad, torch::ones({10, 10}));
  const std::string full = slurp(bad);
  {
    std::ofstream f(bad, std::ios::binary | std::ios::trunc);
    f << full.substr(0, full.size() - 7);
  }
  EXPECT_THROW(read_npy(bad), Error);
  // Unsupported dtype on write.
  EXPECT_THROW(write_npy(bad, torch::ones({2}, torch::kFloat16)), Error);
  std::remove(bad.c_str());
}

// A header is outside input: its shape and lengths are checked against the bytes really present
// before anything is allocated or copied (before, a shape of 10^6 x 10^6 asked LibTorch for 4 TB
// and failed with an allocator error instead of naming the file).
TEST(NpyTest, AHostileHeaderIsRefusedBeforeAnythingIsAllocated) {
  auto npy_with_header = [](const std::string& dict, int major, uint32_t declared_len, size_t data_bytes) {
    std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
    for (int k = 0; k < (major == 1 ? 2 : 4); ++k) out += char((declared_len >> (8 * k)) & 0xFF);
    return out + dict + std::string(data_bytes, '\0');
  };
  auto refusal = [](const std::string& bytes) {
    try {
      parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "hostile.npy");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }";
  EXPECT_NE(refusal(npy_with_header(huge, 1, huge.size(), 16)).find("hostile.npy: truncated .npy data"), std::string::npos);
  const std::string overflow =
      "{'descr': '<i8', 'fortran_order': False, 'shape': (999999999999999999, 999999999999999999, 16), }";
  EXPECT_NE(refusal(npy_with_header(overflow, 1, overflow.size(), 64)).find("truncated .npy data"), std::string::npos);
  // A header length beyond the end of the file, in both length-field sizes.
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_NE(refusal(npy_with_header(ok, 1, 0xFFFF, 8)).find("truncated .npy header"), std::string::npos);
  EXPECT_NE(refusal(npy_with_header(ok, 2, 0xFFFFFFFFu, 8)).find("truncated .npy header"), std::string::npos);
  std::string axes = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int k = 0; k < 40; ++k) axes += "1, ";
  axes += "), }";
  EXPECT_NE(refusal(npy_with_header(axes, 1, axes.size(), 4)).find("more than 32 axes"), std::string::npos);
  // The same bytes with the right length are read, from memory as from a file.
  const std::string good = npy_with_header(ok, 1, ok.size(), 8);
  const auto t = parse_npy(reinterpret_cast<const uint8_t*>(good.data()), good.size(), "good.npy");
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(t.sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace era
