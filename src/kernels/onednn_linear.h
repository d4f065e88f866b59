#pragma once
// Internal header. The vision tower's and projector's linears with weights packed once for
// oneDNN, on CPUs where LibTorch multiplies bfloat16 natively (AVX512-BF16 / AMX); where LibTorch
// cannot pack (Debian's 1.13), the same linears with plain weights, their rows split between the
// threads.
//
// LibTorch's plain bf16 `linear` hands oneDNN a row-major weight, which oneDNN's AMX kernels
// repack into their blocked layout on every call. For CLIP-L's 577-row products at K = 1024 that
// copy is a large share of the call (docs/perf/ measures the products with and without it), so
// the runtime packs each weight once at load with LibTorch's `mkldnn::_reorder_linear_weight` and
// multiplies with `mkldnn::_linear_pointwise` (the pair PyTorch's own CPU compiler uses for frozen
// models). The packed copy replaces the weight: memory stays that of the bf16 model.
//
// The exported Linear (tools/era_tools/llava_model.py) calls the TorchScript operator
// `era::onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor` (= F.linear(x, weight,
// bias)) when its `onednn_packed` attribute is true; the runtime sets it where it packed the
// weight, or routed it plain (below; 0 = never, the exported value). The schema is part of the bundle format: never change it.
//
// Both operators are looked up by name at run time: LibTorch 2.x has them, Debian's 1.13 does
// not. There the runtime routes the same linears through era::onednn_linear with their weights
// plain (split_linears_by_rows), and the operator splits the rows into one block per thread, each
// block one single-threaded product (linear_row_blocks). LibTorch 1.13's own two-thread bf16
// product of the tower's shapes (577 rows, K and N 1024 to 4096) ran at 0.8x that speed on a
// Zen 5 VM, and at 0.65x whenever the hypervisor put the two vCPUs on different core complexes
// (docs/perf/'s CPU section); the 222-row, 4096-wide prefill products ran slower split (0.9x), so
// the decoder keeps LibTorch's product.
#include <torch/script.h>

#include <cstdint>

namespace era {

// Does this LibTorch have oneDNN and the two operators above?
bool onednn_packing_available();

// F.linear(x, weight, bias) for x [..., K]: through oneDNN where `weight` is a packed one
// (pack_for_onednn); for a plain bf16 CPU weight, as linear_row_blocks(rows, threads) products of
// row blocks run in parallel, one thread each (each block's rows bit for bit LibTorch's
// single-threaded product of that block; the whole within bf16 rounding of LibTorch's product);
// LibTorch's linear otherwise (also inside a parallel region, where nothing is split).
torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias);

// How many row blocks onednn_linear splits a product of `rows` rows into with `threads` threads:
// one per thread while each block keeps at least kMinRowsPerBlock rows (a block reads the whole
// weight, so thin blocks would multiply the weight traffic), 1 (no split) below two blocks.
constexpr int64_t kMinRowsPerBlock = 64;
int64_t linear_row_blocks(int64_t rows, int64_t threads);

// A bf16 CPU weight [N, K] in oneDNN's packed layout (an opaque MKLDNN tensor that only
// onednn_linear reads). Throws where onednn_packing_available() is false.
torch::Tensor pack_for_onednn(const torch::Tensor& weight);

// Packs the weight of every exported Linear (a module with `onednn_packed`) under `top` whose
// weight is a 2-D bf16 CPU tensor, and sets its `onednn_packed`; an attention module with
// `qkv_fused` first gets its q / k / v weights packed as one product held by q_proj (k_proj's
// and v_proj's emptied). Returns how many packed products there are.
int pack_linears_for_onednn(torch::jit::Module& top);

// Where LibTorch cannot pack (onednn_packing_available() false): the same modules as
// pack_linears_for_onednn, q / k / v fused the same way into one plain [3C, C] weight, each
// Linear's `onednn_packed` set with its weight left plain, so that every call goes through
// era::onednn_linear and its row blocks. Returns how many Linears it routed.
int split_linears_by_rows(torch::jit::Module& top);

// Keeps this object, and so the operator's registration, in every link (model/cpu_gemv.h's
// register_era_operators calls it).
void register_onednn_linear_operator();

}  // namespace era
