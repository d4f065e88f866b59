#include "model/bundle.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "era/error.h"
#include "kernels/cpu_gemv.h"
#include "kernels/huge_pages.h"
#include "model/export_compat.h"
#include "model/hf_folder.h"
#include "model/int8_weights.h"
#include "model/module_checks.h"
#include "model/native_decoder.h"
#include "model/native_vision.h"
#include "model/vision_backend.h"
#include "util/compat.h"
#include "util/error_text.h"
#include "util/input_file.h"

namespace era {
namespace {

namespace fs = std::filesystem;

// The path of the file a `files.*` field names: relative, inside the bundle folder once every
// symbolic link is resolved, and a regular file (a FIFO or device would block the loader or
// never end). Checked before anything opens it.
std::string bundle_file(const std::string& dir, const std::string& field, const std::string& name) {
  const std::string what = "bundle " + dir + ": " + field + " = \"" + name + "\"";
  const fs::path rel(name);
  if (rel.is_absolute()) throw Error(ErrorCode::kBundle, what + ": must be a path relative to the bundle folder");
  for (const auto& part : rel)
    if (part == "..") throw Error(ErrorCode::kBundle, what + ": must not leave the bundle folder (\"..\")");
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  const fs::path target = fs::weakly_canonical(fs::path(dir) / rel, ec);
  const auto mismatch = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
  if (ec || mismatch.first != root.end())
    throw Error(ErrorCode::kBundle, what + ": resolves to " + target.string() + ", outside the bundle folder");
  const std::string path = (fs::path(dir) / rel).string();
  check_input_file(path, what + ":", uint64_t{1} << 40, ErrorCode::kBundle);
  return path;
}

// `path`: the file bundle_file() checked for `field`.
torch::jit::Module load_module(const std::string& dir, const std::string& field, const std::string& file,
                               const std::string& path) {
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kBundle, "bundle " + dir + ": cannot load " + field + " " + file + " (" + first_line(e.what()) + ")");
  }
}

// The decoder's head layout and the other values baked into it (AttributeChecker); the vision
// tower's are its family's (load_bundle's `family_checks`).
void check_decoder_attributes(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& t = m.text;
  AttributeChecker dec(b.decoder, b.dir, m.decoder_file);
  // the heads first: the usual way a manifest goes wrong is a split of hidden_size into other heads
  for (int64_t i = 0; i < t.num_layers; ++i) {
    const std::string layer = "layers." + std::to_string(i);
    dec.expect(layer + ".self_attn", "num_heads", "text.num_heads", t.num_heads);
    dec.expect(layer + ".self_attn", "num_kv_heads", "text.num_kv_heads", t.num_kv_heads);
    dec.expect(layer + ".self_attn", "head_dim", "text.head_dim", t.head_dim);
    dec.expect(layer + ".self_attn", "cache_head_dim", "text.cache_head_dim", t.cache_head_dim);
    if (t.rms_norm_eps > 0) {
      dec.expect(layer + ".input_layernorm", "eps", "text.rms_norm_eps", t.rms_norm_eps);
      dec.expect(layer + ".post_attention_layernorm", "eps", "text.rms_norm_eps", t.rms_norm_eps);
    }
  }
  dec.expect("", "num_layers", "text.num_layers", t.num_layers);
  dec.expect("", "head_dim", "text.head_dim", t.head_dim);
  dec.expect("", "cache_head_dim", "text.cache_head_dim", t.cache_head_dim);
  dec.expect("", "mrope_section", "text.mrope_section", t.mrope_section);
  if (t.rope_theta > 0) dec.expect("", "rope_theta", "text.rope_theta", t.rope_theta);
  if (t.rms_norm_eps > 0) dec.expect("norm", "eps", "text.rms_norm_eps", t.rms_norm_eps);
}

// The decoder module's checks, common to every family.
void check_decoder_module(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& t = m.text;
  ShapeChecker dec(b.decoder, b.dir, m.decoder_file);
  dec.expect("embed_tokens.weight", {t.vocab_size, t.hidden_size});
  dec.expect("lm_head.weight", {t.vocab_size, t.hidden_size});
  dec.expect("norm.weight", {t.hidden_size});
  for (int64_t i = 0; i < t.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    dec.expect(p + "self_attn.q_proj.weight", {t.num_heads * t.head_dim, t.hidden_size});
    dec.expect(p + "self_attn.k_proj.weight", {t.num_kv_heads * t.head_dim, t.hidden_size});
    dec.expect(p + "self_attn.v_proj.weight", {t.num_kv_heads * t.head_dim, t.hidden_size});
    dec.expect(p + "self_attn.o_proj.weight", {t.hidden_size, t.num_heads * t.head_dim});
    dec.expect(p + "mlp.gate_proj.weight", {t.intermediate_size, t.hidden_size});
    dec.expect(p + "mlp.up_proj.weight", {t.intermediate_size, t.hidden_size});
    dec.expect(p + "mlp.down_proj.weight", {t.hidden_size, t.intermediate_size});
    dec.expect(p + "input_layernorm.weight", {t.hidden_size});
    dec.expect(p + "post_attention_layernorm.weight", {t.hidden_size});
  }
  if (dec.has("layers." + std::to_string(t.num_layers) + ".self_attn.q_proj.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.decoder_file + " has more than the manifest's " +
                                        std::to_string(t.num_layers) + " layers");
  }
  check_decoder_attributes(b);  // after the shapes: what they cannot tell apart
  for (const char* method : {"embed", "forward", "attend"}) {
    if (!b.decoder.find_method(method)) {
      throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.decoder_file + " has no method '" + method + "'");
    }
  }
}

// The tokenizer's checks against the manifest, common to every family.
void check_tokenizer(const ModelBundle& b) {
  const auto& m = b.manifest;
  if (b.tokenizer->size() != m.tokens.tokenizer_vocab_size) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.tokenizer_file + " has " + std::to_string(b.tokenizer->size()) +
                                        " pieces but the manifest says " + std::to_string(m.tokens.tokenizer_vocab_size));
  }
  // BOS and EOS are the tokenizer's own pieces or added tokens; an id outside both would prompt
  // and stop on tokens the model never saw.
  for (const auto& [field, id] : {std::pair{"tokens.bos_id", m.tokens.bos_id}, std::pair{"tokens.eos_id", m.tokens.eos_id}}) {
    if (id < 0) continue;  // bos_id -1: no BOS (the manifest allows it for BOS only)
    bool known = id < b.tokenizer->size();
    for (const auto& added : m.tokens.added_tokens) known = known || added.id == id;
    if (!known) {
      throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": manifest.json: " + field + " = " + std::to_string(id) +
                                          ": is neither a piece of " + m.tokenizer_file + " (" +
                                          std::to_string(b.tokenizer->size()) + " pieces) nor an added token");
    }
  }
}

// A Hugging Face folder's manifest document with the header an export would have written: the
// LibTorch that runs it, the attention kernel, and the weights file in place of the modules'.
std::string hf_manifest_text(const std::string& dir, nlohmann::json doc) {
  doc["exported_with"] = {{"torch", libtorch_version().str()},
                          {"attention", compat::kHasSdpa ? "sdpa" : "math"},
                          {"exporter", "era (read from the Hugging Face folder)"},
                          {"decoder_api", kDecoderApi}};
  std::error_code ec;
  const std::string weights =
      fs::exists(dir + "/model.safetensors.index.json", ec) ? "model.safetensors.index.json" : "model.safetensors";
  for (const char* module : {"vision", "projector", "decoder"}) doc["files"][module] = weights;
  return doc.dump();
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

namespace {

// Module::to(dtype) of LibTorch's TorchScript modules converts every parameter and buffer, int8
// ones too: a weight-only int8 bundle loaded in another dtype lost its int8 weights (and then
// failed in era::int8_linear). As nn.Module.to(dtype) does in Python, only floating-point tensors
// change here, and not a weight-only int8 linear's float32 `scales` (the module that has them, as
// model/cpu_matmul.cpp finds it; rounded to bf16 they would shift every row by up to 0.4 %).
void convert_floating_tensors(torch::jit::Module& top, torch::ScalarType dtype) {
  const auto convert = [&](torch::Tensor t) {
    if (t.is_floating_point() && t.scalar_type() != dtype) t.set_data(t.to(dtype));
  };
  for (const torch::jit::Module m : top.modules()) {
    for (const auto& p : m.named_parameters(/*recurse=*/false)) convert(p.value);
    for (const auto& b : m.named_buffers(/*recurse=*/false)) {
      if (b.name != "scales") convert(b.value);
    }
  }
}

}  // namespace

std::vector<torch::jit::Module*> ModelBundle::scripted_modules() {
  // (built from a fixed array: GCC 12 flags a vector grown by insert() here with a false
  // -Wstringop-overflow, an error under ERA_WERROR)
  torch::jit::Module* const all[] = {&vision, &projector, &decoder};
  const bool loaded[] = {scripted_vision, scripted_vision, scripted_decoder};
  std::vector<torch::jit::Module*> out;
  for (size_t i = 0; i < 3; ++i)
    if (loaded[i]) out.push_back(all[i]);
  return out;
}

ModelBundle load_bundle(const std::string& dir, const torch::Device& device, std::optional<torch::ScalarType> dtype,
                        const FamilyChecks& family, const std::string& hf_weights) {
  if (!fs::is_directory(dir)) throw Error(ErrorCode::kBundle, "model bundle not found: " + dir);
  ModelBundle b;
  b.dir = dir;
  std::string weights_dir = hf_weights;
  if (is_hf_folder(dir)) {
    if (!family.hf_manifest || !family.native_vision)
      throw Error(ErrorCode::kBundle, dir +
                                          ": a Hugging Face folder (config.json, no manifest.json): this loader reads "
                                          "era bundles only");
    b.manifest = parse_manifest(hf_manifest_text(dir, family.hf_manifest(dir)), dir + "/config.json");
    weights_dir = dir;  // every module is era's own, over the folder's weights
  } else {
    b.manifest = read_manifest(dir);
  }
  if (family.sections) family.sections(b.manifest);  // the sections only its family reads
  const bool native = !weights_dir.empty();
  if (native && !b.manifest.int8_weights.empty())
    throw Error(ErrorCode::kBundle, "bundle " + dir + ": manifest.json: quantization.int8 = \"" + b.manifest.int8_weights +
                                        "\": int8 bundle weights do not combine with a Hugging Face folder's weights "
                                        "(era's native models are not quantised yet); use a bundle without --int8");
  b.dtype = dtype.value_or(parse_dtype(b.manifest.dtype));
  b.device = device;
  check_dtype_supported(b.dtype, device);
  if (native) {  // each tensor converted once, straight into the session's dtype and device
    b.native_decoder = load_native_decoder(weights_dir, b.manifest, device, b.dtype);
    if (family.native_vision) b.native_vision = family.native_vision(weights_dir, b.manifest, device, b.dtype);
  }
  const bool native_vision = b.native_vision != nullptr;
  // Before any module is opened: an incompatible one would fail later inside TorchScript, and
  // LibTorch 1.13 only on the first call. Native models need no TorchScript of any version.
  if (!native_vision) check_export_compat(b.manifest, dir, libtorch_version());
  register_era_operators();  // the modules may call era::gemv
  // Every file is checked before the first is opened: a bad one stops the load at once.
  const std::string tokenizer_path = bundle_file(dir, "files.tokenizer", b.manifest.tokenizer_file);
  std::string vision_path, projector_path, decoder_path;
  if (!native_vision) {
    vision_path = bundle_file(dir, "files.vision", b.manifest.vision_file);
    projector_path = bundle_file(dir, "files.projector", b.manifest.projector_file);
  }
  if (!native) decoder_path = bundle_file(dir, "files.decoder", b.manifest.decoder_file);
  const Int8LoadPlan int8 = prepare_int8_load(b.manifest, dir, device);  // int8 weights are packed as they load
  if (!native_vision) {
    b.vision = load_module(dir, "files.vision", b.manifest.vision_file, vision_path);
    b.projector = load_module(dir, "files.projector", b.manifest.projector_file, projector_path);
    b.scripted_vision = true;
  }
  if (!native) {
    b.decoder = load_module(dir, "files.decoder", b.manifest.decoder_file, decoder_path);
    b.scripted_decoder = true;
  }
  b.tokenizer = std::make_unique<Tokenizer>(tokenizer_path);
  if (family.modules && !native_vision) family.modules(b);  // the vision tower and projector: the family's knowledge
  if (!native) check_decoder_module(b);
  check_tokenizer(b);

  const bool convert = b.dtype != parse_dtype(b.manifest.dtype);
  for (auto* m : b.scripted_modules()) {
    m->eval();
    m->to(device);
    if (convert) convert_floating_tensors(*m, b.dtype);  // only when asked: conversion is lossy for fp16/bf16 exports
  }
  b.int8_sources_freed = finish_int8_load(b, int8);
  // Last, once every weight has its final form: decode streams them all each step.
  if (device.is_cpu() && !native) b.huge_page_bytes = move_to_huge_pages(b.decoder);
  if (b.native_decoder) b.huge_page_bytes = b.native_decoder->huge_page_bytes();
  return b;
}

}  // namespace era

namespace era {

int64_t model_weight_bytes(ModelBundle& bundle) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (const torch::jit::Module* m : bundle.scripted_modules()) {
    const auto count = [&](const torch::Tensor& t) {
      if (!t.defined()) return;
      // a weight packed for oneDNN (kernels/onednn_linear.h) is an opaque tensor without storage
      if (!t.has_storage()) {
        if (seen.insert(t.unsafeGetTensorImpl()).second) bytes += t.numel() * static_cast<int64_t>(t.element_size());
        return;
      }
      if (seen.insert(t.storage().unsafeGetStorageImpl()).second) bytes += static_cast<int64_t>(t.storage().nbytes());
    };
    for (const auto& p : m->named_parameters()) count(p.value);
    for (const auto& b : m->named_buffers()) count(b.value);
  }
  if (bundle.native_decoder) bytes += bundle.native_decoder->weight_bytes();
  if (const auto* v = dynamic_cast<const NativeVision*>(bundle.native_vision.get())) bytes += v->weight_bytes();
  return bytes;
}

torch::Tensor projector_parameter(const ModelBundle& bundle, const std::string& name) {
  if (bundle.native_vision) return bundle.native_vision->parameter(name);
  for (const auto& p : bundle.projector.named_parameters()) {
    if (p.name == name) return p.value;
  }
  return {};
}

}  // namespace era
