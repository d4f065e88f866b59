#include "model/int8_weights.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Type.h>
#include <malloc.h>

#include <algorithm>
#include <typeinfo>
#include <vector>

#include "era/error.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/manifest.h"
#include "util/compat.h"

namespace era {

namespace {

// The packed class LibTorch's oneDNN engine makes; the one whose spare copy is freed.
constexpr const char* kOnednnPacked = "PackedLinearWeightsOnednn";

bool engine_supported(at::QEngine engine) {
  const auto& supported = at::globalContext().supportedQEngines();
  return std::find(supported.begin(), supported.end(), engine) != supported.end();
}

c10::intrusive_ptr<LinearPackedParamsBase> packed_of(const torch::jit::Module& linear) {
  return linear.attr("_packed").toCustomClass<LinearPackedParamsBase>();
}

// The dynamic class of a packed weight, e.g. "PackedLinearWeightsOnednn".
std::string class_of(const c10::intrusive_ptr<LinearPackedParamsBase>& packed) { return c10::demangle(typeid(*packed).name()); }

std::vector<torch::jit::Module> bundle_int8_linears(ModelBundle& bundle) {
  std::vector<torch::jit::Module> out;
  for (const torch::jit::Module* top : bundle.scripted_modules()) {
    for (const torch::jit::Module& m : int8_linears(*top)) out.push_back(m);
  }
  return out;
}

// Packs `linear`'s int8 weight anew under the process's engine (quantized::linear_prepack) and
// puts the new packed object in place of the old, which goes with its last reference.
void repack(torch::jit::Module& linear) {
  static const auto prepack = c10::Dispatcher::singleton()
                                  .findSchemaOrThrow("quantized::linear_prepack", "")
                                  .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
  auto [weight, bias] = packed_of(linear)->unpack();
  // QNNPACK stores a missing bias as zeros: pass none, as the export did.
  if (bias && bias->defined() && !bias->ne(0).any().item<bool>()) bias = c10::nullopt;
  linear.setattr("_packed", c10::IValue(prepack.call(std::move(weight), std::move(bias))));
}

// Frees the int8 weight one linear's oneDNN packed object keeps (release_int8_weight_sources,
// without handing the pages back); returns the bytes freed.
int64_t release_source(const torch::jit::Module& linear) {
  const auto packed = packed_of(linear);
  // The class by name, not a subclass: Arm's ACL variant derives from it and reads the original.
  if (class_of(packed) != kOnednnPacked) return 0;
  const at::Tensor first = std::get<0>(packed->unpack());
  const at::Tensor again = std::get<0>(packed->unpack());
  // Another engine rebuilds a fresh tensor per unpack(): nothing is kept, nothing to free.
  if (!first.defined() || first.unsafeGetTensorImpl() != again.unsafeGetTensorImpl() || first.numel() == 0) return 0;
  const auto bytes = static_cast<int64_t>(first.storage().nbytes());
  first.storage().unsafeGetStorageImpl()->reset();
  // No rows: whoever still calls unpack() (saving the module) gets an empty weight, not a
  // dangling pointer.
  first.unsafeGetTensorImpl()->set_sizes_contiguous({0, first.size(1)});
  return bytes;
}

}  // namespace

Int8LoadPlan prepare_int8_load(const Manifest& manifest, const std::string& dir, const torch::Device& device) {
  Int8LoadPlan plan;
  // Weight-only int8 linears hold plain tensors (model/int8_linear.h): no engine, any device.
  if (manifest.int8_weights.empty() || manifest.int8_scheme == "weight-only") return plan;
  if (!device.is_cpu()) {
    throw Error(ErrorCode::kInvalidArgument,
                dir + ": quantization.int8 = \"" + manifest.int8_weights +
                    "\" (int8_scheme \"dynamic\"): LibTorch's quantised linears run on the CPU only (it has no "
                    "quantised linear on " +
                    device.str() + "); export the checkpoint with --int8-scheme weight-only (or without --int8) for GPUs");
  }
  for (at::QEngine e : compat::quantized_engines_by_preference()) {
    if (engine_supported(e)) {
      plan.run = e;
      break;
    }
  }
  if (plan.run == at::QEngine::NoQEngine) {
    throw Error(ErrorCode::kBundle,
                dir + ": quantization.int8 = \"" + manifest.int8_weights +
                    "\": this LibTorch has no quantisation engine (fbgemm, onednn or qnnpack) to run int8 weights");
  }
  plan.int8 = true;
  plan.load = plan.run == at::QEngine::ONEDNN && engine_supported(at::QEngine::QNNPACK) ? at::QEngine::QNNPACK : plan.run;
  at::globalContext().setQEngine(plan.load);
  return plan;
}

int64_t finish_int8_load(ModelBundle& bundle, const Int8LoadPlan& plan) {
  if (!plan.int8) return 0;
  at::globalContext().setQEngine(plan.run);
  int64_t freed = 0;
  for (torch::jit::Module m : bundle_int8_linears(bundle)) {
    // One linear at a time: each new packed copy replaces a lazily packed one, and its spare
    // copy is freed before the next is made, so memory never holds two copies of more than one
    // weight.
    if (plan.load != plan.run) repack(m);
    const int64_t bytes = release_source(m);
    // oneDNN allocates its copies itself: the freed weight's pages go back to the system now,
    // or the next copy grows the heap beside the hole.
    if (bytes > 0) malloc_trim(0);
    freed += bytes;
  }
  configure_int8_modules(bundle);
  return freed;
}

std::string int8_engine_name() { return c10::toString(at::globalContext().qEngine()); }

std::string int8_packed_class(const torch::jit::Module& linear) { return class_of(packed_of(linear)); }

std::vector<torch::jit::Module> int8_linears(const torch::jit::Module& top) {
  std::vector<torch::jit::Module> out;
  for (const torch::jit::Module m : top.modules()) {
    if (m.hasattr("_packed") && m.attr("_packed").isCustomClass()) out.push_back(m);
  }
  return out;
}

int configure_int8_modules(ModelBundle& bundle) {
  if (bundle.manifest.int8_weights.empty()) return 0;
  // Without VNNI, x86 int8 kernels (fbgemm's and oneDNN's alike) multiply u8 x s8 with
  // vpmaddubsw, whose 16-bit pair sums saturate on 8-bit activations: measured on docs/perf/'s
  // AVX2 machine, oneDNN with 8-bit activations gave a 17.5 % worst logit error against 2.2 %
  // with 7 bits. VNNI's vpdpbusd accumulates in 32 bits: full 8 bits there.
  const bool reduce = !(cpu_has_flag("avx512_vnni") || cpu_has_flag("avx_vnni"));
  int count = 0;
  for (torch::jit::Module m : bundle_int8_linears(bundle)) {
    if (!m.hasattr("reduce_range")) continue;
    m.setattr("reduce_range", reduce);
    ++count;
  }
  return count;
}

int64_t release_int8_weight_sources(torch::jit::Module& module) {
  int64_t freed = 0;
  for (const torch::jit::Module& m : int8_linears(module)) freed += release_source(m);
  // The weights were small heap blocks to glibc (under its mmap threshold after the first
  // frees): give the freed pages back to the system.
  if (freed > 0) malloc_trim(0);
  return freed;
}

}  // namespace era
