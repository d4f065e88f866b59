#pragma once
// Which bundles this LibTorch can run, judged by the torch that exported them (manifest
// exported_with.torch and exported_with.attention), before any TorchScript file is opened.
//
// TorchScript loads a file written by an older or the same torch; a file from a newer torch may
// call operators or schemas the older runtime lacks, and LibTorch 1.13 only notices on the first
// call, deep inside the interpreter. Measured (tools/README.md, "Which bundle loads where"):
// bundles exported by torch 1.13 and 2.11 with --attention math run on LibTorch 1.13 and 2.11;
// --attention sdpa calls aten::scaled_dot_product_attention(scale=), which exists from 2.1.
#include <optional>
#include <string>

#include "model/manifest.h"

namespace era {

struct TorchVersion {
  int major = 0;
  int minor = 0;
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The LibTorch this build runs on.
TorchVersion libtorch_version();

// "2.11.0+cu130", "1.13.0a0", "2.1" -> {major, minor}; nullopt when it does not start with N.N.
std::optional<TorchVersion> parse_torch_version(const std::string& text);

// Throws era::Error(kBundle) naming the bundle, the manifest field, `running` and the fix when a
// bundle exported as `m` says cannot run on LibTorch `running`.
void check_export_compat(const Manifest& m, const std::string& bundle_dir, const TorchVersion& running);

}  // namespace era
