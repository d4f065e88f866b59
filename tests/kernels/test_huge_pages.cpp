// Weights and the KV cache in transparent huge pages (model/huge_pages.h): the copy is equal, 2
// MiB-aligned and advised for huge pages (the mapping's VmFlags carry "hg"); zeros are zeros; a
// module's large tensors move in place and its small, view and shared ones stay.
#include <gtest/gtest.h>

#include <torch/script.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kernels/huge_pages.h"
#include "model/kv_cache.h"

namespace era {
namespace {

// The VmFlags of the mapping that holds address p (/proc/self/smaps), "" where none.
std::string vm_flags_at(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8);
  }
  return "";
}

bool advised(const torch::Tensor& t) { return vm_flags_at(t.data_ptr()).find(" hg") != std::string::npos; }

TEST(HugePages, AvailabilityIsTheKernelsThpSetting) {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  std::getline(f, setting);
  EXPECT_EQ(huge_pages_available(),
            setting.find("[always]") != std::string::npos || setting.find("[madvise]") != std::string::npos)
      << setting;
}

TEST(HugePages, CopyIsEqualAlignedAndAdvised) {
  if (!huge_pages_available()) GTEST_SKIP() << "transparent huge pages are off on this machine";
  torch::manual_seed(0);
  const torch::Tensor t = torch::randn({3 * 1024 * 1024 + 5}).to(torch::kBFloat16);  // 6 MiB and 10 bytes
  const torch::Tensor copy = copy_to_huge_pages(t);
  EXPECT_NE(copy.data_ptr(), t.data_ptr());
  EXPECT_TRUE(torch::equal(copy, t));
  EXPECT_EQ(copy.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data_ptr()) % kHugePageBytes, 0u);
  EXPECT_TRUE(advised(copy)) << vm_flags_at(copy.data_ptr());
  EXPECT_FALSE(advised(t)) << "LibTorch's own allocation was advised already: the test proves nothing";
}

TEST(HugePages, ZerosAreZerosAndLargeOnesAdvised) {
  const auto bf16 = torch::dtype(torch::kBFloat16);
  const torch::Tensor small = zeros_in_huge_pages({16, 16}, bf16);
  EXPECT_TRUE(torch::equal(small, torch::zeros({16, 16}, bf16)));
  const torch::Tensor large = zeros_in_huge_pages({2, 3, 1024, 512}, bf16);  // 6 MiB
  EXPECT_EQ(large.sizes(), (std::vector<int64_t>{2, 3, 1024, 512}));
  EXPECT_EQ(large.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(large.count_nonzero().item<int64_t>(), 0);
  large.select(0, 1).fill_(2.0);  // writable, and freed by its tensor
  EXPECT_EQ(large.sum().item<double>(), 2.0 * 3 * 1024 * 512);
  if (!huge_pages_available()) GTEST_SKIP() << "transparent huge pages are off on this machine";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data_ptr()) % kHugePageBytes, 0u);
  EXPECT_TRUE(advised(large)) << vm_flags_at(large.data_ptr());
}

// The decoder's KV cache, which each decode step reads up to its length, lives there too.
TEST(HugePages, TheKvCacheIsInHugePages) {
  if (!huge_pages_available()) GTEST_SKIP() << "transparent huge pages are off on this machine";
  TextSpec spec;
  spec.num_layers = 2;
  spec.num_kv_heads = 4;
  spec.head_dim = 128;
  spec.cache_head_dim = 136;
  const KvCache cache(spec, 1, 2048, torch::kBFloat16, torch::kCPU);  // 4.25 MiB each for K and V
  EXPECT_TRUE(advised(cache.keys())) << vm_flags_at(cache.keys().data_ptr());
  EXPECT_TRUE(advised(cache.values()));
  EXPECT_EQ(cache.keys().count_nonzero().item<int64_t>(), 0);
}

TEST(HugePages, ModuleTensorsMoveInPlaceAndViewsAndSmallOnesStay) {
  if (!huge_pages_available()) GTEST_SKIP() << "transparent huge pages are off on this machine";
  torch::manual_seed(1);
  torch::jit::Module m("m");
  const torch::Tensor big = torch::randn({1024, 1024});  // 4 MiB
  const torch::Tensor small = torch::randn({16, 16});
  const torch::Tensor shared = torch::randn({1024, 1024});
  torch::jit::Module child("child");
  child.register_parameter("weight", big.clone(), /*is_buffer=*/false);
  m.register_module("child", child);
  m.register_parameter("small", small.clone(), false);
  m.register_buffer("shared", shared);  // a buffer; `shared` is the same tensor and sees the move
  const torch::Tensor view_base = torch::randn({2048, 1024});
  m.register_buffer("view", view_base.narrow(0, 0, 1024));  // a view: not moved
  const void* before_small = m.attr("small").toTensor().data_ptr();
  const torch::Tensor held = child.attr("weight").toTensor();  // a holder of the tensor, as a graph is
  const int64_t moved = move_to_huge_pages(m);
  EXPECT_EQ(moved, 2 * 4 * 1024 * 1024);  // the child's weight and the buffer
  EXPECT_TRUE(torch::equal(held, big));
  EXPECT_EQ(held.data_ptr(), child.attr("weight").toTensor().data_ptr()) << "not moved in place";
  EXPECT_TRUE(advised(held));
  EXPECT_TRUE(torch::equal(m.attr("shared").toTensor(), shared));
  EXPECT_EQ(m.attr("small").toTensor().data_ptr(), before_small);
  EXPECT_EQ(m.attr("view").toTensor().data_ptr(), view_base.data_ptr());
}

}  // namespace
}  // namespace era
