#include "model/bundle.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "era/error.h"
#include "kernels/cpu_gemv.h"
#include "model/export_compat.h"
#include "kernels/huge_pages.h"
#include "model/int8_weights.h"
#include "util/input_file.h"
#include "util/error_text.h"

namespace era {
namespace {

namespace fs = std::filesystem;

std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream os;
  os << shape;
  return os.str();
}

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

// Checks the shape of one named parameter of a module against what the manifest implies (-1 in
// an expected shape: any size in that dimension).
class ShapeChecker {
 public:
  ShapeChecker(const torch::jit::Module& m, std::string dir, std::string file) : dir_(std::move(dir)), file_(std::move(file)) {
    for (const auto& p : m.named_parameters(/*recurse=*/true)) params_.emplace(p.name, p.value.sizes().vec());
    // weight-only int8 linears (model/int8_linear.h) hold their int8 weight as a buffer
    for (const auto& b : m.named_buffers(/*recurse=*/true)) {
      const std::string suffix = ".weight";
      const bool weight = b.name.size() > suffix.size() && b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (weight && b.value.scalar_type() == torch::kChar) params_.emplace(b.name, b.value.sizes().vec());
    }
    // int8 linears (tools/era_tools/int8_weights.py) hold their weight packed, not as a
    // parameter: their declared [out_features, in_features] stands in for it
    for (const auto& sub : m.named_modules()) {
      if (!sub.value.hasattr("_packed") || !sub.value.hasattr("out_features") || !sub.value.hasattr("in_features")) continue;
      params_.emplace(sub.name + ".weight",
                      std::vector<int64_t>{sub.value.attr("out_features").toInt(), sub.value.attr("in_features").toInt()});
    }
  }
  bool has(const std::string& name) const { return params_.count(name) > 0; }
  void expect(const std::string& name, std::vector<int64_t> shape) const {
    const auto it = params_.find(name);
    if (it == params_.end()) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " has no parameter '" + name + "' (not an era export?)");
    }
    bool same = it->second.size() == shape.size();
    for (size_t d = 0; same && d < shape.size(); ++d) same = shape[d] < 0 || it->second[d] == shape[d];
    if (!same) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " parameter '" + name + "' has shape " +
                                          shape_str(it->second) + " but the manifest implies " + shape_str(shape) +
                                          " (module from another model?)");
    }
  }

 private:
  std::map<std::string, std::vector<int64_t>> params_;  // name -> shape
  std::string dir_, file_;
};

std::string shown(int64_t v) { return std::to_string(v); }
std::string shown(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string shown(const std::vector<int64_t>& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
  return text + "]";
}

// Checks the manifest against the values the exporter's modules keep as attributes:
// torch.jit.script keeps a module's Python ints, floats and lists (tools/era_tools/llava_model.py:
// each attention's num_heads / num_kv_heads / head_dim, the decoder's rope_theta, ...). The weight
// shapes fix only products such as num_heads x head_dim: a manifest that keeps the product but not
// the split would load, then fail inside TorchScript in every request. A module or attribute that
// is not there (modules from another exporter) is not checked.
class AttributeChecker {
 public:
  AttributeChecker(const torch::jit::Module& m, std::string dir, std::string file)
      : dir_(std::move(dir)), file_(std::move(file)) {
    for (const auto& sub : m.named_modules()) modules_.emplace(sub.name, sub.value);
  }
  // manifest `field` = `expected` must be the attribute `name` of the submodule `module` ("" = the
  // module itself).
  void expect(const std::string& module, const std::string& name, const std::string& field, int64_t expected) const {
    const auto value = attribute(module, name);
    if (value && value->isInt() && value->toInt() != expected) fail(module, name, field, shown(expected), shown(value->toInt()));
  }
  void expect(const std::string& module, const std::string& name, const std::string& field, double expected) const {
    const auto value = attribute(module, name);
    // both are the exporter's one Python float, written as its shortest round-trip text: equal
    // unless they were edited apart (the tolerance only absorbs a differently printed manifest)
    if (value && value->isDouble() && std::fabs(value->toDouble() - expected) > 1e-9 * std::fabs(expected))
      fail(module, name, field, shown(expected), shown(value->toDouble()));
  }
  void expect(const std::string& module, const std::string& name, const std::string& field,
              const std::vector<int64_t>& expected) const {
    const auto value = attribute(module, name);
    if (value && value->isIntList() && value->toIntVector() != expected)
      fail(module, name, field, shown(expected), shown(value->toIntVector()));
  }
  // A list of booleans attribute against the indexes where it must be true (Qwen2.5-VL's
  // full-attention blocks).
  void expect_true_at(const std::string& module, const std::string& name, const std::string& field,
                      const std::vector<int64_t>& expected) const {
    const auto value = attribute(module, name);
    if (!value || !value->isBoolList()) return;
    std::vector<int64_t> at;
    const auto flags = value->toBoolList();
    for (size_t i = 0; i < flags.size(); ++i)
      if (flags.get(i)) at.push_back(static_cast<int64_t>(i));
    if (at != expected) fail(module, name + " (true at)", field, shown(expected), shown(at));
  }

 private:
  std::optional<c10::IValue> attribute(const std::string& module, const std::string& name) const {
    const auto it = modules_.find(module);
    if (it == modules_.end() || !it->second.hasattr(name)) return std::nullopt;
    return it->second.attr(name);
  }
  [[noreturn]] void fail(const std::string& module, const std::string& name, const std::string& field, const std::string& manifest,
                         const std::string& actual) const {
    throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": manifest.json: " + field + " = " + manifest + " but " + file_ + "'s " +
                                        (module.empty() ? "" : module + ".") + name + " is " + actual +
                                        " (the value the module was exported with)");
  }

  std::map<std::string, torch::jit::Module> modules_;  // submodule name -> module
  std::string dir_, file_;
};

// The head layout and the other values baked into the modules (AttributeChecker).
void check_module_attributes(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& v = m.vision;
  const auto& t = m.text;
  AttributeChecker vision(b.vision, b.dir, m.vision_file);
  if (m.image.layout == ImageLayout::kNative) {
    vision.expect("", "num_heads", "vision.num_heads", v.num_heads);
    for (int64_t i = 0; i < v.num_layers; ++i)
      vision.expect("blocks." + std::to_string(i) + ".attn", "num_heads", "vision.num_heads", v.num_heads);
    vision.expect("", "merge", "vision.spatial_merge_size", v.spatial_merge_size);
    // the exporter's window in merged-token units: window_size // spatial_merge_size // patch_size
    if (v.window_size > 0) {
      vision.expect("", "window_units", "vision.window_size " + std::to_string(v.window_size) + " / spatial_merge_size / patch_size",
                    v.window_size / v.spatial_merge_size / v.patch_size);
    }
    if (v.fullatt_block_indexes)
      vision.expect_true_at("", "full_attention", "vision.fullatt_block_indexes", *v.fullatt_block_indexes);
  } else {
    for (int64_t i = 0; i < v.layers_run; ++i)
      vision.expect("encoder.layers." + std::to_string(i) + ".self_attn", "num_heads", "vision.num_heads", v.num_heads);
    vision.expect("encoder", "num_layers", "vision.layers_run", v.layers_run);
    // HF hidden_states indices, made non-negative as the exporter does (num_layers + 1 + k)
    std::vector<int64_t> indices;
    for (const int64_t k : v.feature_layers) indices.push_back(k < 0 ? v.num_layers + 1 + k : k);
    vision.expect("encoder", "feature_indices", "vision.feature_layers " + shown(v.feature_layers) + " as hidden_states indices",
                  indices);
    vision.expect("", "first_token", "vision.select_strategy \"" + v.select_strategy + "\" as the first feature token",
                  int64_t{v.select_strategy == "full" ? 0 : 1});
  }
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

// A native-resolution tower (Qwen2.5-VL): Conv3d patch embedding, blocks with fused q/k/v and
// gated MLPs, the merger's RMSNorm (its MLP is the projector).
void check_native_tower(ShapeChecker& vision, const ModelBundle& b) {
  const auto& v = b.manifest.vision;
  vision.expect("patch_embed.proj.weight", {v.hidden_size, 3, v.temporal_patch_size, v.patch_size, v.patch_size});
  const int64_t mlp = v.intermediate_size > 0 ? v.intermediate_size : -1;
  for (int64_t i = 0; i < v.num_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    vision.expect(p + "attn.qkv.weight", {3 * v.hidden_size, v.hidden_size});
    vision.expect(p + "attn.proj.weight", {v.hidden_size, v.hidden_size});
    vision.expect(p + "mlp.gate_proj.weight", {mlp, v.hidden_size});
    vision.expect(p + "mlp.down_proj.weight", {v.hidden_size, mlp});
  }
  if (vision.has("blocks." + std::to_string(v.num_layers) + ".attn.qkv.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + b.manifest.vision_file + " has more than the manifest's " +
                                        std::to_string(v.num_layers) + " vision blocks (vision.num_layers)");
  }
}

void check_modules(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& v = m.vision;
  ShapeChecker vision(b.vision, b.dir, m.vision_file);
  if (m.image.layout == ImageLayout::kNative) {
    check_native_tower(vision, b);
  } else {
  vision.expect("embeddings.patch_embedding.weight", {v.hidden_size, 3, v.patch_size, v.patch_size});
  vision.expect("embeddings.position_embedding.weight", {v.num_patches + (v.has_cls ? 1 : 0), v.hidden_size});
  // The exporter keeps the layers_run layers the features need (the rest never run).
  const int64_t vision_mlp = v.intermediate_size > 0 ? v.intermediate_size : -1;
  for (int64_t i = 0; i < v.layers_run; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"})
      vision.expect(p + "self_attn." + proj + ".weight", {v.hidden_size, v.hidden_size});
    vision.expect(p + "mlp.fc1.weight", {vision_mlp, v.hidden_size});
    vision.expect(p + "mlp.fc2.weight", {v.hidden_size, vision_mlp});
  }
  if (vision.has("encoder.layers." + std::to_string(v.layers_run) + ".self_attn.q_proj.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.vision_file + " has more than the manifest's " +
                                        std::to_string(v.layers_run) + " vision layers (vision.layers_run)");
  }
  }

  ShapeChecker proj(b.projector, b.dir, m.projector_file);
  // Qwen2.5-VL's merger MLP keeps its input width inside (4C -> 4C -> D); LLaVA's goes to D first
  const int64_t hidden = m.image.layout == ImageLayout::kNative ? m.projector_in : m.projector_out;
  proj.expect("linear_1.weight", {hidden, m.projector_in});
  proj.expect("linear_2.weight", {m.projector_out, hidden});
  if (m.image.layout == ImageLayout::kAnyres) proj.expect("image_newline", {m.projector_out});

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
  check_module_attributes(b);  // after the shapes: what they cannot tell apart
  for (const char* method : {"embed", "forward", "attend"}) {
    if (!b.decoder.find_method(method)) {
      throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.decoder_file + " has no method '" + method + "'");
    }
  }
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

ModelBundle load_bundle(const std::string& dir, const torch::Device& device, std::optional<torch::ScalarType> dtype) {
  if (!fs::is_directory(dir)) throw Error(ErrorCode::kBundle, "model bundle not found: " + dir);
  ModelBundle b;
  b.dir = dir;
  b.manifest = read_manifest(dir);
  // Before any module is opened: an incompatible one would fail later inside TorchScript, and
  // LibTorch 1.13 only on the first call.
  check_export_compat(b.manifest, dir, libtorch_version());
  register_era_operators();  // the modules may call era::gemv
  // Every file is checked before the first is opened: a bad one stops the load at once.
  const std::string tokenizer_path = bundle_file(dir, "files.tokenizer", b.manifest.tokenizer_file);
  const std::string vision_path = bundle_file(dir, "files.vision", b.manifest.vision_file);
  const std::string projector_path = bundle_file(dir, "files.projector", b.manifest.projector_file);
  const std::string decoder_path = bundle_file(dir, "files.decoder", b.manifest.decoder_file);
  const Int8LoadPlan int8 = prepare_int8_load(b.manifest, dir, device);  // int8 weights are packed as they load
  b.vision = load_module(dir, "files.vision", b.manifest.vision_file, vision_path);
  b.projector = load_module(dir, "files.projector", b.manifest.projector_file, projector_path);
  b.decoder = load_module(dir, "files.decoder", b.manifest.decoder_file, decoder_path);
  b.tokenizer = std::make_unique<Tokenizer>(tokenizer_path);
  check_modules(b);

  b.dtype = dtype.value_or(parse_dtype(b.manifest.dtype));
  b.device = device;
  check_dtype_supported(b.dtype, device);
  const bool convert = b.dtype != parse_dtype(b.manifest.dtype);
  for (auto* m : {&b.vision, &b.projector, &b.decoder}) {
    m->eval();
    m->to(device);
    if (convert) convert_floating_tensors(*m, b.dtype);  // only when asked: conversion is lossy for fp16/bf16 exports
  }
  b.int8_sources_freed = finish_int8_load(b, int8);
  // Last, once every weight has its final form: decode streams them all each step.
  if (device.is_cpu()) b.huge_page_bytes = move_to_huge_pages(b.decoder);
  if (b.manifest.image.layout == ImageLayout::kAnyres) {
    for (const auto& p : b.projector.named_parameters()) {
      if (p.name == "image_newline") b.image_newline = p.value;
    }
  }
  return b;
}

}  // namespace era
