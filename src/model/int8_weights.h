#pragma once
// Internal header. Bundles with int8 weights (tools/export_llava.py --int8, manifest
// quantization.int8): their Linear layers are LibTorch dynamically quantised linears whose packed
// weights are re-packed at load for the process's quantisation engine, so the engine is chosen
// before the modules are opened, and the activations' range is set per engine afterwards.
#include <torch/script.h>

#include <string>

namespace era {

struct Manifest;
struct ModelBundle;

// Before the modules load: refuses a non-CPU device (LibTorch's int8 linear is CPU only; there is
// no weight-only int8 matmul on CUDA in LibTorch) and a LibTorch without a quantisation engine
// (kBundle, naming the bundle and quantization.int8); selects the fastest engine this LibTorch
// has (x86, fbgemm, onednn, qnnpack). Does nothing for a bundle without int8 weights.
void prepare_int8_load(const Manifest& manifest, const std::string& dir, const torch::Device& device);

// The quantisation engine in use, e.g. "X86" (for reports).
std::string int8_engine_name();

// After the modules load: sets each Int8Linear's reduce_range for the CPU (7-bit activations
// without VNNI, where the u8 x s8 pair sums can saturate; 8 bits with it). Returns how many int8
// linears the bundle has.
int configure_int8_modules(ModelBundle& bundle);

}  // namespace era
