#include "model/bundle.h"

#include <filesystem>
#include <map>
#include <sstream>

#include "era/error.h"
#include "model/export_compat.h"

namespace era {
namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream os;
  os << shape;
  return os.str();
}

torch::jit::Module load_module(const std::string& dir, const std::string& file) {
  const std::string path = dir + "/" + file;
  if (!fs::is_regular_file(path)) throw Error(ErrorCode::kBundle, "bundle " + dir + ": missing module " + file);
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kBundle, "bundle " + dir + ": cannot load " + file + " (" + first_line(e.what()) + ")");
  }
}

// Checks the shape of one named parameter of a module against what the manifest implies.
class ShapeChecker {
 public:
  ShapeChecker(const torch::jit::Module& m, std::string dir, std::string file) : dir_(std::move(dir)), file_(std::move(file)) {
    for (const auto& p : m.named_parameters(/*recurse=*/true)) params_.emplace(p.name, p.value);
  }
  bool has(const std::string& name) const { return params_.count(name) > 0; }
  void expect(const std::string& name, std::vector<int64_t> shape) const {
    const auto it = params_.find(name);
    if (it == params_.end()) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " has no parameter '" + name + "' (not an era export?)");
    }
    if (it->second.sizes() != at::IntArrayRef(shape)) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " parameter '" + name + "' has shape " +
                                          shape_str(it->second.sizes()) + " but the manifest implies " + shape_str(shape) +
                                          " (module from another model?)");
    }
  }

 private:
  std::map<std::string, at::Tensor> params_;
  std::string dir_, file_;
};

void check_modules(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& v = m.vision;
  ShapeChecker vision(b.vision, b.dir, m.vision_file);
  vision.expect("embeddings.patch_embedding.weight", {v.hidden_size, 3, v.patch_size, v.patch_size});
  vision.expect("embeddings.position_embedding.weight", {v.num_patches + 1, v.hidden_size});

  ShapeChecker proj(b.projector, b.dir, m.projector_file);
  proj.expect("linear_1.weight", {m.projector_out, m.projector_in});
  proj.expect("linear_2.weight", {m.projector_out, m.projector_out});
  if (m.image.layout == ImageLayout::kAnyres) proj.expect("image_newline", {m.projector_out});

  const auto& t = m.text;
  ShapeChecker dec(b.decoder, b.dir, m.decoder_file);
  dec.expect("embed_tokens.weight", {t.vocab_size, t.hidden_size});
  dec.expect("lm_head.weight", {t.vocab_size, t.hidden_size});
  for (int64_t i = 0; i < t.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".self_attn.";
    dec.expect(p + "q_proj.weight", {t.num_heads * t.head_dim, t.hidden_size});
    dec.expect(p + "k_proj.weight", {t.num_kv_heads * t.head_dim, t.hidden_size});
  }
  if (dec.has("layers." + std::to_string(t.num_layers) + ".self_attn.q_proj.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.decoder_file + " has more than the manifest's " +
                                        std::to_string(t.num_layers) + " layers");
  }
  for (const char* method : {"embed", "forward", "attend"}) {
    if (!b.decoder.find_method(method)) {
      throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.decoder_file + " has no method '" + method + "'");
    }
  }
  if (b.tokenizer->size() != m.tokens.tokenizer_vocab_size) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.tokenizer_file + " has " + std::to_string(b.tokenizer->size()) +
                                        " pieces but the manifest says " + std::to_string(m.tokens.tokenizer_vocab_size));
  }
}

}  // namespace

// Some LibTorch builds lack the kernels a dtype needs on a device (LibTorch 1.13 has no float16
// matmul on the CPU): refuse at load time with a clear message rather than fail deep inside the
// first request with a TorchScript interpreter trace.
static void check_dtype_supported(torch::ScalarType dtype, const torch::Device& device) {
  if (dtype == torch::kFloat) return;
  try {
    const auto a = torch::ones({2, 2}, torch::TensorOptions().dtype(dtype).device(device));
    (void)torch::matmul(a, a).sum().item<double>();
  } catch (const std::exception&) {
    throw Error(ErrorCode::kInvalidArgument, "dtype " + dtype_name(dtype) + " is not supported on " + device.str() +
                                                 " by this LibTorch build (no matrix multiply kernel); use float32" +
                                                 (device.is_cpu() ? " or bfloat16 on the CPU, or a CUDA device" : ""));
  }
}

torch::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "fp32" || name == "float") return torch::kFloat;
  if (name == "float16" || name == "fp16" || name == "half") return torch::kHalf;
  if (name == "bfloat16" || name == "bf16") return torch::kBFloat16;
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype '" + name + "' (use float32, float16 or bfloat16)");
}

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat: return "float32";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return c10::toString(dtype);
  }
}

ModelBundle load_bundle(const std::string& dir, const torch::Device& device, std::optional<torch::ScalarType> dtype) {
  if (!fs::is_directory(dir)) throw Error(ErrorCode::kBundle, "model bundle not found: " + dir);
  ModelBundle b;
  b.dir = dir;
  b.manifest = read_manifest(dir);
  // Before any module is opened: an incompatible one would fail later inside TorchScript, and
  // LibTorch 1.13 only on the first call.
  check_export_compat(b.manifest, dir, libtorch_version());
  b.vision = load_module(dir, b.manifest.vision_file);
  b.projector = load_module(dir, b.manifest.projector_file);
  b.decoder = load_module(dir, b.manifest.decoder_file);
  b.tokenizer = std::make_unique<Tokenizer>(dir + "/" + b.manifest.tokenizer_file);
  check_modules(b);

  b.dtype = dtype.value_or(parse_dtype(b.manifest.dtype));
  b.device = device;
  check_dtype_supported(b.dtype, device);
  const bool convert = b.dtype != parse_dtype(b.manifest.dtype);
  for (auto* m : {&b.vision, &b.projector, &b.decoder}) {
    m->eval();
    m->to(device);
    if (convert) m->to(b.dtype);  // only when asked: conversion is lossy for fp16/bf16 exports
  }
  if (b.manifest.image.layout == ImageLayout::kAnyres) {
    for (const auto& p : b.projector.named_parameters()) {
      if (p.name == "image_newline") b.image_newline = p.value;
    }
  }
  return b;
}

}  // namespace era
