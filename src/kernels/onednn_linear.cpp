#include "kernels/onednn_linear.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/linear_shape.h"

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
  torch::jit::Stack stack{x.contiguous(),
                          packed,
                          bias && bias->defined() ? c10::IValue(*bias) : c10::IValue(),
                          c10::IValue(std::string("none")),
                          c10::IValue(no_scalars),
                          c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

// x [..., K] times the plain weight [N, K], in `blocks` blocks of rows run in parallel. Inside
// at::parallel_for each product runs on its thread alone (LibTorch's kernels, and oneDNN's under
// OpenMP, do not nest), so the blocks share nothing but the read-only weight and x. The caller's
// thread-local state goes with each block: under InferenceMode (a session) the output is an
// inference tensor, which a worker thread outside that mode may not write into.
torch::Tensor linear_by_row_blocks(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias,
                                   int64_t blocks) {
  const torch::Tensor rows_by_k = x.reshape({-1, x.size(-1)}).contiguous(), weight_t = weight.t();
  const int64_t rows = rows_by_k.size(0);
  torch::Tensor y = torch::empty({rows, weight.size(0)}, rows_by_k.options());
  const at::ThreadLocalState caller;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    const at::ThreadLocalStateGuard as_the_caller(caller);
    for (int64_t b = first; b < last; ++b) {
      const int64_t r0 = b * rows / blocks, r1 = (b + 1) * rows / blocks;
      torch::Tensor out = y.narrow(0, r0, r1 - r0);  // a contiguous block: written in place
      if (bias && bias->defined()) at::addmm_out(out, *bias, rows_by_k.narrow(0, r0, r1 - r0), weight_t);
      else at::mm_out(out, rows_by_k.narrow(0, r0, r1 - r0), weight_t);
    }
  });
  return y.view(linear_output_shape(x, weight.size(0)));
}

torch::Tensor onednn_linear_operator(const torch::Tensor& x, const torch::Tensor& weight,
                                     const c10::optional<torch::Tensor>& bias) {
  return onednn_linear(x, weight, bias);
}

// The weight of an exported Linear that can be packed (or routed plain): a 2-D bf16 CPU tensor,
// not packed yet, the Linear not routed yet.
bool packable(const torch::jit::Module& linear) {
  if (!linear.hasattr("onednn_packed") || !linear.hasattr("weight") || !linear.attr("weight").isTensor()) return false;
  const torch::Tensor w = linear.attr("weight").toTensor();
  return !linear.attr("onednn_packed").toBool() && !w.is_mkldnn() && w.dim() == 2 && w.is_cpu() &&
         w.scalar_type() == torch::kBFloat16;
}

// A weight as the route wants it: packed for oneDNN, or plain.
torch::Tensor routed(const torch::Tensor& weight, bool pack) { return pack ? pack_for_onednn(weight) : weight; }

// An attention module with `qkv_fused` (tools/era_tools/llava_model.py, CLIPAttention): q, k and
// v's weights (and biases) concatenated into one [3C, C] product (packed, or plain) held by q_proj;
// k_proj's and v_proj's weights emptied (freed). At 577 rows on AMX one such product ran 1.5-1.9x
// faster than the three (docs/perf/). Returns whether it fused.
bool fuse_qkv(torch::jit::Module& attention, bool pack) {
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
  const torch::Tensor fused = routed(torch::cat(weights, 0), pack);
  weights.clear();
  qkv[0].setattr("weight", fused);
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
  const bool bf16_cpu = x.is_cpu() && weight.is_cpu() && x.scalar_type() == torch::kBFloat16 &&
                        weight.scalar_type() == torch::kBFloat16 && weight.dim() == 2 && x.dim() >= 1;
  if (bf16_cpu && x.size(-1) == weight.size(1)) {
    const int64_t blocks = linear_row_blocks(linear_rows(x), at::get_num_threads());
    if (blocks > 1 && !at::in_parallel_region()) return linear_by_row_blocks(x, weight, bias, blocks);
  }
  return torch::linear(x, weight, bias && bias->defined() ? *bias : torch::Tensor());
}

int64_t linear_row_blocks(int64_t rows, int64_t threads) {
  const int64_t blocks = std::min(threads, rows / kMinRowsPerBlock);
  return blocks >= 2 ? blocks : 1;
}

torch::Tensor pack_for_onednn(const torch::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.is_cpu() && weight.scalar_type() == torch::kBFloat16,
              "era::pack_for_onednn: the weight must be a bf16 CPU [N, K] tensor, got ", weight.scalar_type(), " ",
              weight.sizes(), " on ", weight.device());
  const auto& op = require_operator(reorder_linear_weight(), "mkldnn::_reorder_linear_weight");
  // No batch-size hint: the tower's 577 rows, a NeXT request's five crops at once and the
  // projector's 576 rows all ran at the same speed from one packing (docs/perf/).
  torch::jit::Stack stack{weight.contiguous(), c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

namespace {

int route_linears(torch::jit::Module& top, bool pack) {
  int routed_linears = 0;
  for (torch::jit::Module m : top.modules()) routed_linears += fuse_qkv(m, pack);
  for (torch::jit::Module m : top.modules()) {
    if (!packable(m)) continue;  // also a routed (fused) q_proj, and a fused k_proj / v_proj: its weight is empty
    // The packed copy replaces the weight (the module's only reference), so the plain one is
    // freed here, one linear at a time.
    m.setattr("weight", routed(m.attr("weight").toTensor(), pack));
    m.setattr("onednn_packed", true);
    ++routed_linears;
  }
  return routed_linears;
}

}  // namespace

int pack_linears_for_onednn(torch::jit::Module& top) { return route_linears(top, /*pack=*/true); }

int split_linears_by_rows(torch::jit::Module& top) { return route_linears(top, /*pack=*/false); }

void register_onednn_linear_operator() {}  // the registrations below run when this object is linked in

// The bundle format's operator (the schema is fixed: bundles carry calls to it). A packed weight
// is an MKLDNN tensor; CompositeExplicitAutograd covers that key as well as CPU and CUDA.
TORCH_LIBRARY_FRAGMENT(era, m) { m.def("onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor"); }
TORCH_LIBRARY_IMPL(era, CompositeExplicitAutograd, m) { m.impl("onednn_linear", &onednn_linear_operator); }

}  // namespace era
