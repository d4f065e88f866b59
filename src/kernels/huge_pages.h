#pragma once
// Internal header. The decode step's weights in transparent huge pages (Linux THP).
//
// A decode step streams every decoder weight once (3.5 GB for a 7B-width, 8-layer bf16 model): in
// 4 KiB pages that is a page walk every 4 KiB and a hardware prefetcher that stops at each page's
// edge. LibTorch's CPU allocator leaves large tensors in ordinary pages on Linux's default THP
// setting ("madvise": huge pages only where asked for). Measured on docs/perf/'s 2-vCPU Zen 5 VM,
// alternating THP "always" and "madvise" (the default) for the same bundle: decode 64-65 vs 69 ms
// per token, the 1 GiB read probe 83-85 vs 78-79 GB/s.
#include <torch/script.h>

#include <cstdint>

namespace era {

constexpr int64_t kHugePageBytes = int64_t{2} << 20;

// Does this Linux give huge pages to memory that asks for them (THP "always" or "madvise")?
bool huge_pages_available();

// A contiguous copy of CPU tensor `t` in 2 MiB-aligned memory whose whole 2 MiB pages are advised
// for huge pages (madvise MADV_HUGEPAGE; a last partial page stays ordinary, so the copy is no
// larger resident than the original); `t` itself where huge pages are not available.
torch::Tensor copy_to_huge_pages(const torch::Tensor& t);

// torch::zeros(sizes, options), for a CPU tensor of 2 MiB or more in such memory: a fresh
// anonymous mapping, zero until written and resident only where written (the KV cache: each
// decode step reads every layer's keys and values so far).
torch::Tensor zeros_in_huge_pages(at::IntArrayRef sizes, const torch::TensorOptions& options);

// Moves each CPU tensor of `module` and its submodules (parameters, buffers and other tensor
// attributes) of at least min_bytes into such memory, in place (Tensor::set_data: every holder of
// the tensor sees the new memory, the old is freed). Skipped: a tensor that is a view or whose
// storage is shared (moving it would keep both copies). Returns the bytes moved.
int64_t move_to_huge_pages(torch::jit::Module& module, int64_t min_bytes = kHugePageBytes);

// This process's anonymous memory in huge pages now (AnonHugePages of /proc/self/smaps_rollup;
// 0 where Linux does not tell).
int64_t resident_huge_page_bytes();

}  // namespace era
