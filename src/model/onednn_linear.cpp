#include "model/onednn_linear.h"

#include <ATen/Context.h>
#include <torch/library.h>

#include <string>
#include <vector>

namespace era {

namespace {

// LibTorch's operators by name (absent from Debian's 1.13), each looked up once.
const c10::optional<c10::OperatorHandle>& linear_pointwise() {
  static const auto op = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
  return op;
}

const c10::optional<c10::OperatorHandle>& reorder_linear_weight() {
  static const auto op = c10::Dispatcher::singleton().findSchema({"mkldnn::_reorder_linear_weight", ""});
  return op;
}

const c10::OperatorHandle& require_operator(const c10::optional<c10::OperatorHandle>& op, const char* name) {
  TORCH_CHECK(op.has_value(), "era::onednn_linear: this LibTorch has no ", name);
  return *op;
}

// Called boxed: the operators' C++ signatures differ between LibTorch releases, their schemas
// (the TorchScript ones) do not.
torch::Tensor packed_product(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  const auto& op = require_operator(linear_pointwise(), "mkldnn::_linear_pointwise");
  // _linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars, str? algorithm)
  c10::impl::GenericList no_scalars(c10::OptionalType::create(c10::NumberType::get()));
  torch::jit::Stack stack{x.contiguous(), packed, bias && bias->defined() ? c10::IValue(*bias) : c10::IValue(),
                          c10::IValue(std::string("none")), c10::IValue(no_scalars), c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

torch::Tensor onednn_linear_operator(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
  return onednn_linear(x, weight, bias);
}

// The weight of an exported Linear that can be packed: a 2-D bf16 CPU tensor, not packed yet.
bool packable(const torch::jit::Module& linear) {
  if (!linear.hasattr("onednn_packed") || !linear.hasattr("weight") || !linear.attr("weight").isTensor()) return false;
  const torch::Tensor w = linear.attr("weight").toTensor();
  return !w.is_mkldnn() && w.dim() == 2 && w.is_cpu() && w.scalar_type() == torch::kBFloat16;
}

// An attention module with `qkv_fused` (tools/era_tools/llava_model.py, CLIPAttention): q, k and
// v's weights (and biases) concatenated into one packed [3C, C] product held by q_proj; k_proj's
// and v_proj's weights emptied (freed). At 577 rows on AMX one such product ran 1.5-1.9x faster
// than the three (README). Returns whether it fused.
bool fuse_qkv(torch::jit::Module& attention) {
  if (!attention.hasattr("qkv_fused") || attention.attr("qkv_fused").toBool()) return false;
  std::vector<torch::jit::Module> qkv;
  for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
    if (!attention.hasattr(name) || !attention.attr(name).isModule()) return false;
    qkv.push_back(attention.attr(name).toModule());
    if (!packable(qkv.back())) return false;
  }
  std::vector<torch::Tensor> weights, biases;
  for (const auto& m : qkv) {
    weights.push_back(m.attr("weight").toTensor());
    const c10::IValue b = m.attr("bias");
    if (b.isTensor()) biases.push_back(b.toTensor());
  }
  if (weights[0].sizes() != weights[1].sizes() || weights[0].sizes() != weights[2].sizes()) return false;
  if (!biases.empty() && biases.size() != 3) return false;  // some with a bias, some without
  const torch::Tensor packed = pack_for_onednn(torch::cat(weights, 0));
  weights.clear();
  qkv[0].setattr("weight", packed);
  if (!biases.empty()) qkv[0].setattr("bias", torch::cat(biases, 0));
  qkv[0].setattr("onednn_packed", true);
  for (size_t i = 1; i < qkv.size(); ++i) qkv[i].setattr("weight", torch::empty({0}, torch::kBFloat16));
  attention.setattr("qkv_fused", true);
  return true;
}

}  // namespace

bool onednn_packing_available() {
  return at::hasMKLDNN() && linear_pointwise().has_value() && reorder_linear_weight().has_value();
}

torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias) {
  if (weight.is_mkldnn()) {
    TORCH_CHECK(x.size(-1) == weight.size(1), "era::onednn_linear: x ", x.sizes(), " does not match the packed weight ",
                weight.sizes());
    return packed_product(x, weight, bias);
  }
  return torch::linear(x, weight, bias && bias->defined() ? *bias : torch::Tensor());
}

torch::Tensor pack_for_onednn(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.is_cpu() && weight.scalar_type() == torch::kBFloat16,
              "era::pack_for_onednn: the weight must be a bf16 CPU [N, K] tensor, got ", weight.scalar_type(), " ", weight.sizes(),
              " on ", weight.device());
  const auto& op = require_operator(reorder_linear_weight(), "mkldnn::_reorder_linear_weight");
  // No batch-size hint: the tower's 577 rows, a NeXT request's five crops at once and the
  // projector's 576 rows all ran at the same speed from one packing (README).
  torch::jit::Stack stack{weight.contiguous(), c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

int pack_linears_for_onednn(torch::jit::Module& top) {
  int packed = 0;
  for (torch::jit::Module m : top.modules()) packed += fuse_qkv(m);
  for (torch::jit::Module m : top.modules()) {
    if (!packable(m)) continue;  // also a fused k_proj / v_proj: its weight is empty
    // The packed copy replaces the weight (the module's only reference), so the plain one is
    // freed here, one linear at a time.
    m.setattr("weight", pack_for_onednn(m.attr("weight").toTensor()));
    m.setattr("onednn_packed", true);
    ++packed;
  }
  return packed;
}

void register_onednn_linear_operator() {}  // the registrations below run when this object is linked in

// The bundle format's operator (the schema is fixed: bundles carry calls to it). A packed weight
// is an MKLDNN tensor; CompositeExplicitAutograd covers that key as well as CPU and CUDA.
TORCH_LIBRARY_FRAGMENT(era, m) { m.def("onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor"); }
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("onednn_linear", &onednn_linear_operator); }

}  // namespace era
