#include "model/onednn_linear.h"

#include <ATen/Context.h>
#include <torch/library.h>

#include <string>

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

const c10::OperatorHandle& require(const c10::optional<c10::OperatorHandle>& op, const char* name) {
  TORCH_CHECK(op.has_value(), "era::onednn_linear: this LibTorch has no ", name);
  return *op;
}

// Called boxed: the operators' C++ signatures differ between LibTorch releases, their schemas
// (the TorchScript ones) do not.
torch::Tensor packed_product(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  const auto& op = require(linear_pointwise(), "mkldnn::_linear_pointwise");
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
  const auto& op = require(reorder_linear_weight(), "mkldnn::_reorder_linear_weight");
  // No batch-size hint: the tower's 577 rows, a NeXT request's five crops at once and the
  // projector's 576 rows all ran at the same speed from one packing (README).
  torch::jit::Stack stack{weight.contiguous(), c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

int pack_linears_for_onednn(torch::jit::Module& top) {
  int packed = 0;
  for (torch::jit::Module m : top.modules()) {
    if (!m.hasattr("onednn_packed") || !m.hasattr("weight")) continue;
    const c10::IValue w = m.attr("weight");
    if (!w.isTensor()) continue;
    const torch::Tensor weight = w.toTensor();
    if (weight.is_mkldnn() || weight.dim() != 2 || !weight.is_cpu() || weight.scalar_type() != torch::kBFloat16) continue;
    // The packed copy replaces the weight (the module's only reference), so the plain one is
    // freed here, one linear at a time.
    m.setattr("weight", pack_for_onednn(weight));
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
