#pragma once
// Internal header. Bundles with int8 weights of the "dynamic" scheme (tools/export_llava.py --int8
// --int8-scheme dynamic, and every int8 bundle exported before the schemes; manifest
// quantization.int8 / int8_scheme): their Linear layers are LibTorch dynamically quantised
// linears whose packed weights are re-packed at load for the process's quantisation engine, so
// the engine is chosen before the modules are opened, and the linears are finished for it
// afterwards. The "weight-only" scheme's linears are plain tensors run by era::int8_linear
// (model/int8_linear.h): nothing here applies to them.
#include <torch/script.h>

#include <string>
#include <vector>

namespace era {

struct Manifest;
struct ModelBundle;

// What prepare_int8_load chose: the engine the linears run on, and the one they load under.
struct Int8LoadPlan {
  bool int8 = false;  // the bundle has int8 weights
  at::QEngine run = at::QEngine::NoQEngine;
  at::QEngine load = at::QEngine::NoQEngine;
};

// Before the modules load (a dynamic-scheme bundle; otherwise nothing happens): refuses a non-CPU device (LibTorch's int8 linear
// is CPU only; there is no weight-only int8 matmul on CUDA in LibTorch) and a LibTorch without a quantisation engine (kBundle,
// naming the bundle and quantization.int8); picks the fastest engine this LibTorch has (x86, fbgemm, onednn, qnnpack) to run on.
// oneDNN keeps the int8 weight it packs from beside its packed copy, so a oneDNN run loads under QNNPACK where it exists (which
// keeps the weight as it is and packs nothing until first use) and finish_int8_load packs one linear at a time: loading peaks at
// one copy of the weights instead of two. Sets the process's engine to plan.load. Does nothing for a bundle without int8 weights.
Int8LoadPlan prepare_int8_load(const Manifest& manifest, const std::string& dir, const torch::Device& device);

// After the modules load: packs every int8 linear loaded under another engine for plan.run (and
// makes plan.run the process's engine), sets each linear's activation range
// (configure_int8_modules) and frees the engine's spare weight copies
// (release_int8_weight_sources). Returns the bytes freed.
int64_t finish_int8_load(ModelBundle& bundle, const Int8LoadPlan& plan);

// The quantisation engine in use, e.g. "X86" (for reports).
std::string int8_engine_name();

// The class of a linear's packed weight, e.g. "PackedLinearWeightsOnednn" (for tests, reports).
std::string int8_packed_class(const torch::jit::Module& linear);

// The int8 linears in `top` and its submodules (those holding a packed weight), in module order.
std::vector<torch::jit::Module> int8_linears(const torch::jit::Module& top);

// Sets each Int8Linear's reduce_range for the CPU (7-bit activations without VNNI, where the
// u8 x s8 pair sums can saturate; 8 bits with it). Returns how many int8 linears the bundle has.
int configure_int8_modules(ModelBundle& bundle);

// Frees the int8 weights that the quantisation engine keeps beside its packed copy only to give
// them back from unpack(), which era never calls: oneDNN's (the only x86 engine in Debian's 1.13,
// which has no fbgemm) leaves every int8 weight resident twice. Only exactly that packed class
// is touched (its forward reads the packed copy and the bias, never the original), and only where
// unpack() really hands back the one kept tensor; that tensor is left with no rows. Returns the
// bytes freed (0 for other engines).
int64_t release_int8_weight_sources(torch::jit::Module& module);

}  // namespace era
