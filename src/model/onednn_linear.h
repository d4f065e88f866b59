#pragma once
// Internal header. The vision tower's and projector's linears with weights packed once for
// oneDNN, on CPUs where LibTorch multiplies bfloat16 natively (AVX512-BF16 / AMX).
//
// LibTorch's plain bf16 `linear` hands oneDNN a row-major weight, which oneDNN's AMX kernels
// repack into their blocked layout on every call. For CLIP-L's 577-row products at K = 1024 that
// copy is a large share of the call (the README measures the products with and without it), so
// the runtime packs each weight once at load with LibTorch's `mkldnn::_reorder_linear_weight` and
// multiplies with `mkldnn::_linear_pointwise` (the pair PyTorch's own CPU compiler uses for frozen
// models). The packed copy replaces the weight: memory stays that of the bf16 model.
//
// The exported Linear (tools/era_tools/llava_model.py) calls the TorchScript operator
// `era::onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor` (= F.linear(x, weight,
// bias)) when its `onednn_packed` attribute is true; the runtime sets it where it packed the
// weight (0 = never, the exported value). The schema is part of the bundle format: never change it.
//
// Both operators are looked up by name at run time: LibTorch 2.x has them, Debian's 1.13 does
// not (there nothing is packed and era::onednn_linear is F.linear).
#include <torch/script.h>

#include <cstdint>

namespace era {

// Does this LibTorch have oneDNN and the two operators above?
bool onednn_packing_available();

// F.linear(x, weight, bias) for x [..., K]: through oneDNN where `weight` is a packed one
// (pack_for_onednn), LibTorch's linear otherwise.
torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias);

// A bf16 CPU weight [N, K] in oneDNN's packed layout (an opaque MKLDNN tensor that only
// onednn_linear reads). Throws where onednn_packing_available() is false.
torch::Tensor pack_for_onednn(const torch::Tensor& weight);

// Packs the weight of every exported Linear (a module with `onednn_packed`) under `top` whose
// weight is a 2-D bf16 CPU tensor, and sets its `onednn_packed`; an attention module with
// `qkv_fused` first gets its q / k / v weights packed as one product held by q_proj (k_proj's
// and v_proj's emptied). Returns how many packed products there are.
int pack_linears_for_onednn(torch::jit::Module& top);

// Keeps this object, and so the operator's registration, in every link (model/cpu_gemv.h's
// register_era_operators calls it).
void register_onednn_linear_operator();

}  // namespace era
