// util/device: device names resolved and checked in one place, with errors that say whether the
// build or the machine lacks CUDA; and no other file of the engine calling LibTorch's CUDA APIs.
#include "util/device.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "era/error.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;

std::string resolve_error(const std::string& name) {
  try {
    (void)device::resolve(name);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(Device, ResolvesCpu) {
  const torch::Device d = device::resolve("cpu");
  EXPECT_TRUE(d.is_cpu());
  EXPECT_FALSE(device::allocator_stats_available(d));
  EXPECT_EQ(device::allocated_bytes(d), 0);
  device::synchronize(d);  // nothing to wait for, must not throw
}

TEST(Device, RefusesNamesThatAreNotDevices) {
  for (const std::string name : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:0 ", "cuda:00000", "cpu:0", "mps"}) {
    const std::string msg = resolve_error(name);
    EXPECT_NE(msg.find("unknown device '" + name + "'"), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("use cpu, cuda or cuda:N"), std::string::npos) << msg;
  }
}

// CMake tells the tests whether the LibTorch it found has CUDA; the library linked at run time
// must agree (the PyPI route's libtorch_cuda really is loaded, Debian's CPU-only one really is not).
TEST(Device, CudaSupportIsTheBuilds) {
  EXPECT_EQ(device::cuda_compiled(), static_cast<bool>(ERA_BUILD_HAS_CUDA));
  if (!device::cuda_compiled()) {
    EXPECT_EQ(device::cuda_device_count(), 0);
  }
}

// The machines CI runs on have no GPU: "cuda" must fail up front with the reason, never later
// inside a kernel. (On a GPU machine the same call must give the device instead.)
TEST(Device, CudaWithoutAGpuIsAClearError) {
  if (device::cuda_device_count() > 0) {
    const torch::Device d = device::resolve("cuda");
    EXPECT_TRUE(d.is_cuda());
    EXPECT_TRUE(device::allocator_stats_available(d));
    const std::string past = "cuda:" + std::to_string(device::cuda_device_count());
    EXPECT_NE(resolve_error(past).find("this machine has"), std::string::npos);
    return;
  }
  for (const std::string name : {"cuda", "cuda:0", "cuda:3"}) {
    const std::string msg = resolve_error(name);
    EXPECT_NE(msg.find("device '" + name + "' requested"), std::string::npos) << msg;
    if (device::cuda_compiled()) {
      EXPECT_NE(msg.find("no CUDA device is usable on this machine"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("without CUDA"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--route pypi"), std::string::npos) << msg;
    }
  }
}

// The stream era's CUDA kernels launch on: LibTorch's current one on a GPU (its default stream is
// the null stream, so only "no error" is checked there); off CUDA a clear error.
TEST(Device, CurrentCudaStreamIsLibTorchsOrAClearError) {
  try {
    (void)device::current_cuda_stream(torch::Device(torch::kCPU));
    ADD_FAILURE() << "a CUDA stream for the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no CUDA stream on device 'cpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(device::cuda_compiled() ? "not a CUDA device" : "this era has no CUDA"),
              std::string::npos)
        << e.what();
  }
  if (device::cuda_device_count() > 0) {
    EXPECT_NO_THROW(device::current_cuda_stream(device::resolve("cuda")));
  }
}

// Everything that touches a device goes through util/device: no other engine file may call
// LibTorch's CUDA-specific APIs or pick a CUDA device itself (those calls would bypass the
// checks above and break the CPU-only build).
TEST(Device, OnlyUtilDeviceCallsCudaApis) {
  const std::regex cuda_api(
      R"(torch::cuda::|c10::cuda::|at::cuda::|#include\s*<(c10|ATen)/cuda/|torch::kCUDA|at::kCUDA|c10::kCUDA|cuda_runtime)");
  const fs::path src = fs::path(test::source_dir()) / "src";
  const fs::path allowed = src / "util" / "device.cpp";
  int scanned = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const auto ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".h" && ext != ".in") continue;
    ++scanned;
    if (entry.path() == allowed) continue;
    std::ifstream in(entry.path());
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      EXPECT_FALSE(std::regex_search(line, cuda_api)) << entry.path().string() << ":" << line_no << ": " << line;
    }
  }
  EXPECT_GT(scanned, 50);  // the walk really saw the engine's sources
}

}  // namespace
}  // namespace era
