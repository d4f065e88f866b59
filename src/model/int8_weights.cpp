#include "model/int8_weights.h"

#include <ATen/Context.h>

#include <algorithm>

#include "era/error.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/manifest.h"
#include "util/compat.h"

namespace era {

void prepare_int8_load(const Manifest& manifest, const std::string& dir, const torch::Device& device) {
  if (manifest.int8_weights.empty()) return;
  if (!device.is_cpu()) {
    throw Error(ErrorCode::kInvalidArgument,
                dir + ": quantization.int8 = \"" + manifest.int8_weights + "\": int8 bundles run on the CPU only (LibTorch has no "
                "weight-only int8 matmul on " + device.str() + "); export the checkpoint without --int8 for GPUs");
  }
  const auto& supported = at::globalContext().supportedQEngines();
  for (at::QEngine e : compat::quantized_engines_by_preference()) {
    if (std::find(supported.begin(), supported.end(), e) != supported.end()) {
      at::globalContext().setQEngine(e);
      return;
    }
  }
  throw Error(ErrorCode::kBundle, dir + ": quantization.int8 = \"" + manifest.int8_weights +
                                      "\": this LibTorch has no quantisation engine (fbgemm, onednn or qnnpack) to run int8 weights");
}

std::string int8_engine_name() { return c10::toString(at::globalContext().qEngine()); }

int configure_int8_modules(ModelBundle& bundle) {
  if (bundle.manifest.int8_weights.empty()) return 0;
  // Without VNNI, x86 int8 kernels (fbgemm's and oneDNN's alike) multiply u8 x s8 with
  // vpmaddubsw, whose 16-bit pair sums saturate on 8-bit activations: measured on the README's
  // AVX2 machine, oneDNN with 8-bit activations gave a 17.5 % worst logit error against 2.2 %
  // with 7 bits. VNNI's vpdpbusd accumulates in 32 bits: full 8 bits there.
  const bool reduce = !(cpu_has_flag("avx512_vnni") || cpu_has_flag("avx_vnni"));
  int count = 0;
  for (torch::jit::Module* top : {&bundle.vision, &bundle.projector, &bundle.decoder}) {
    for (torch::jit::Module m : top->modules()) {
      if (!m.hasattr("_packed") || !m.hasattr("reduce_range")) continue;
      m.setattr("reduce_range", reduce);
      ++count;
    }
  }
  return count;
}

}  // namespace era
