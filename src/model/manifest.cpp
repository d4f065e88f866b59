#include "model/manifest.h"

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "util/input_file.h"

namespace era {
namespace {

using nlohmann::json;

// Bounds on the numbers of a manifest (docs/bundle-format.md, "Validation"). Far above every
// real checkpoint (LLaMA-3-405B: 126 layers, hidden 16384, 128 heads, vocabulary 128256), far
// below what would make a loader allocate absurdly or overflow: a manifest is outside input.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxWidth = 65536;           // hidden sizes
constexpr int64_t kMaxIntermediate = 1 << 20;  // MLP widths, projector widths
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxLarChannels = 64;  // cache_head_dim - head_dim: the bias channel + padding
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxContext = int64_t{1} << 24;
constexpr int64_t kMaxImageSize = 4096;

void read_header(const ManifestFields& f, Manifest& m) {
  m.format_version = static_cast<int>(f.integer("format_version", 1, 1));  // the one this build reads
  // Which architectures this build serves is the model families' business (family/registry.cpp).
  m.arch = f.text("arch");
  m.model_name = f.text_or("model_name", m.arch);
  m.dtype = f.text("dtype");
  m.attention = f.text_or("exported_with.attention", "math");
  m.decoder_api = static_cast<int>(f.integer_or("exported_with.decoder_api", 0, 1000, 1));
  f.require(m.decoder_api == kDecoderApi, "exported with decoder API " + std::to_string(m.decoder_api) + ", this build needs " +
                                              std::to_string(kDecoderApi) +
                                              ": re-export the checkpoint with this version of tools/export_llava.py");
  // Which LibTorch can run the modules depends on the torch that wrote them (model/export_compat.h).
  m.exported_torch = f.text("exported_with.torch");
  // int8 Linear weights (tools/era_tools/int8_weights.py): in the decoder, or everywhere
  m.int8_weights = f.text_or("quantization.int8", "");
  if (m.int8_weights != "" && m.int8_weights != "decoder" && m.int8_weights != "all")
    f.bad("quantization.int8", json(m.int8_weights), "must be \"decoder\" or \"all\"");
  if (!m.int8_weights.empty()) {
    // int8 bundles exported before the weight-only scheme hold LibTorch's quantised linears
    m.int8_scheme = f.text_or("quantization.int8_scheme", "dynamic");
    if (m.int8_scheme != "weight-only" && m.int8_scheme != "dynamic")
      f.bad("quantization.int8_scheme", json(m.int8_scheme), "must be \"weight-only\" or \"dynamic\"");
  }
  // Only the names here; bundle.cpp checks that each is a regular file inside the bundle folder.
  for (auto [field_name, out] : {std::pair{"files.vision", &m.vision_file}, std::pair{"files.projector", &m.projector_file},
                                 std::pair{"files.decoder", &m.decoder_file}, std::pair{"files.tokenizer", &m.tokenizer_file}}) {
    *out = f.text(field_name);
    if (out->empty() || out->find('\0') != std::string::npos) f.bad(field_name, json(*out), "must name a file in the bundle");
  }
}

VisionSpec read_vision(const ManifestFields& f) {
  VisionSpec v;
  v.image_size = f.integer("vision.image_size", 1, kMaxImageSize);
  v.patch_size = f.integer("vision.patch_size", 1, v.image_size);
  v.has_cls = f.flag_or("vision.has_cls", v.has_cls);
  // SigLIP's patch convolution drops the remainder (384 px / 14 -> 27 patches); CLIP's sizes divide.
  if (v.has_cls && v.image_size % v.patch_size != 0)
    f.bad("vision.patch_size", json(v.patch_size), "must divide vision.image_size " + std::to_string(v.image_size));
  const int64_t side = v.image_size / v.patch_size;
  v.num_patches = f.integer("vision.num_patches", side * side, side * side);  // (image_size / patch_size)^2
  v.hidden_size = f.integer("vision.hidden_size", 1, kMaxWidth);
  v.num_heads = f.integer("vision.num_heads", 1, kMaxHeads);
  if (v.hidden_size % v.num_heads != 0)
    f.bad("vision.num_heads", json(v.num_heads), "must divide vision.hidden_size " + std::to_string(v.hidden_size));
  v.num_layers = f.integer("vision.num_layers", 1, kMaxLayers);
  v.intermediate_size = f.integer_or("vision.intermediate_size", 1, kMaxIntermediate, 0);
  // HF's vision_feature_layer: an index into the num_layers + 1 hidden states, negative from the end.
  v.feature_layer = f.integer("vision.feature_layer", -(v.num_layers + 1), v.num_layers);
  v.layers_run = f.integer("vision.layers_run", 1, v.num_layers);
  // Bundles exported before these fields existed are single-layer, CLS-dropping ones.
  v.feature_layers = {v.feature_layer};
  if (const json* layers = f.find("vision.feature_layers")) {
    v.feature_layers = f.integers(*layers, "vision.feature_layers", -(v.num_layers + 1), v.num_layers, 64);
    v.feature_layer_count = static_cast<int64_t>(v.feature_layers.size());
  }
  v.select_strategy = f.text_or("vision.select_strategy", "default");
  f.require(v.select_strategy == "default" || v.select_strategy == "full",
            "vision.select_strategy must be \"default\" or \"full\", got \"" + v.select_strategy + "\"");
  v.tokens_per_crop = v.num_patches + (v.keeps_cls() ? 1 : 0);
  return v;
}

TextSpec read_text(const ManifestFields& f) {
  TextSpec t;
  t.hidden_size = f.integer("text.hidden_size", 1, kMaxWidth);
  t.num_layers = f.integer("text.num_layers", 1, kMaxLayers);
  t.num_heads = f.integer("text.num_heads", 1, kMaxHeads);
  t.num_kv_heads = f.integer("text.num_kv_heads", 1, t.num_heads);
  if (t.num_heads % t.num_kv_heads != 0)
    f.bad("text.num_kv_heads", json(t.num_kv_heads), "must divide text.num_heads " + std::to_string(t.num_heads));
  t.head_dim = f.integer("text.head_dim", 1, kMaxHeadDim);
  // heads x head_dim = hidden holds for every decoder era serves (LLaMA, Vicuna, Mistral-7B, Yi,
  // Qwen2); the decoder's q_proj/o_proj shapes are checked against both when the modules load.
  if (t.num_heads * t.head_dim != t.hidden_size)
    f.bad("text.head_dim", json(t.head_dim),
          "text.num_heads x text.head_dim must equal text.hidden_size " + std::to_string(t.hidden_size));
  t.rope_theta = f.positive_number_or("text.rope_theta", 1e12, 0);
  t.rms_norm_eps = f.positive_number_or("text.rms_norm_eps", 1, 0);
  t.cache_head_dim = f.integer("text.cache_head_dim", t.head_dim + 1, t.head_dim + kMaxLarChannels);
  if (t.cache_head_dim % 8 != 0)
    f.bad("text.cache_head_dim", json(t.cache_head_dim), "must be a multiple of 8 (head_dim + the LAR channel, padded)");
  t.intermediate_size = f.integer("text.intermediate_size", 1, kMaxIntermediate);
  t.vocab_size = f.integer("text.vocab_size", 1, kMaxVocab);
  t.max_position_embeddings = f.integer("text.max_position_embeddings", 2, kMaxContext);
  // null or absent: no window (LLaMA; Mistral-7B-Instruct-v0.2 sets null)
  if (const json* window = f.find("text.sliding_window"); window && !window->is_null()) {
    t.sliding_window = f.integer_value(*window, "text.sliding_window", 1, kMaxContext);
  }
  if (const json* sections = f.find("text.mrope_section")) {
    t.mrope_section = f.integers(*sections, "text.mrope_section", 1, t.head_dim, 3);
    int64_t sum = 0;
    for (const int64_t x : t.mrope_section) sum += x;
    if (t.mrope_section.size() != 3 || 2 * sum != t.head_dim)
      f.bad("text.mrope_section", *sections,
            "must be 3 sections (temporal, height, width) summing to text.head_dim / 2 = " + std::to_string(t.head_dim / 2));
  }
  return t;
}

TokenSpec read_tokens(const ManifestFields& f, int64_t vocab_size) {
  TokenSpec k;
  const int64_t last_id = vocab_size - 1;
  // ids: inside the vocabulary; bos_id -1: the tokenizer has no BOS (Qwen2)
  k.bos_id = f.integer("tokens.bos_id", -1, last_id);
  k.eos_id = f.integer("tokens.eos_id", 0, last_id);
  k.pad_id = f.integer_or("tokens.pad_id", -1, last_id, -1);  // -1: none
  k.image_token_id = f.integer("tokens.image_token_id", 0, last_id);
  k.video_token_id = f.integer_or("tokens.video_token_id", -1, last_id, -1);
  f.require(k.video_token_id < 0 || k.video_token_id != k.image_token_id,
            "tokens.video_token_id must differ from tokens.image_token_id");
  k.tokenizer_vocab_size = f.integer("tokens.tokenizer_vocab_size", 1, vocab_size);
  if (const json* stops = f.find("tokens.stop_ids")) {
    k.stop_ids = f.integers(*stops, "tokens.stop_ids", 0, last_id, 64);
  } else {
    k.stop_ids = {k.eos_id};
  }
  if (const json* list = f.find("tokens.added_tokens")) {
    f.require(list->is_array() && list->size() <= 4096, "tokens.added_tokens must be a list of {content, id}");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string item = "tokens.added_tokens[" + std::to_string(i) + "]";
      const json& entry = (*list)[i];
      f.require(entry.is_object() && entry.contains("content") && entry["content"].is_string() && entry.contains("id"),
                item + " must be {\"content\": string, \"id\": integer}");
      AddedToken tok{entry["content"].get<std::string>(), f.integer_value(entry["id"], item + ".id", 0, last_id)};
      f.require(!tok.content.empty(), item + ".content is empty");
      k.added_tokens.push_back(tok);
    }
  }
  return k;
}

PromptTemplate read_prompt(const ManifestFields& f) {
  // An unknown template must not be prompted in some other style: the answers would be garbage.
  const std::string tmpl_name = f.text("prompt.template");
  PromptTemplate p;
  if (!find_prompt_template(tmpl_name, &p)) {
    std::string known;
    for (const auto& n : known_prompt_templates()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kBundle,
                f.where() + ": prompt.template '" + tmpl_name + "' is not one this build knows (" + known + ")");
  }
  // vicuna_v1 has no system text of its own worth guessing: the exporter always writes it.
  p.system = p.style == TemplateStyle::kVicunaV1 || f.find("prompt.system") ? f.text("prompt.system") : p.system;
  p.user_role = f.text_or("prompt.user_role", p.user_role);
  p.assistant_role = f.text_or("prompt.assistant_role", p.assistant_role);
  p.sep = f.text_or("prompt.sep", p.sep);
  p.image_placeholder = f.text_or("prompt.image_placeholder", p.image_placeholder);
  p.video_placeholder = f.text_or("prompt.video_placeholder", p.video_placeholder);
  f.require(!p.video_placeholder.empty() && p.video_placeholder != p.image_placeholder,
            "prompt.video_placeholder must be non-empty and differ from prompt.image_placeholder");
  return p;
}

Manifest manifest_from_json(std::shared_ptr<const json> document, const std::string& path) {
  const json& j = *document;
  const ManifestFields f(j, path);
  f.require(j.is_object() && j.contains("format") && j["format"] == "era-bundle",
            "not an era bundle manifest (format != era-bundle)");
  Manifest m;
  m.source = path;
  read_header(f, m);
  m.vision = read_vision(f);
  m.text = read_text(f);
  // The projector ends at the decoder's width; what it starts from (the tower's width times the
  // feature layers, or the merged patches) its family checks.
  m.projector_in = f.integer("projector.in_features", 1, kMaxIntermediate);
  m.projector_out = f.integer("projector.out_features", 1, kMaxIntermediate);
  if (m.projector_out != m.text.hidden_size)
    f.bad("projector.out_features", json(m.projector_out), "must equal text.hidden_size " + std::to_string(m.text.hidden_size));
  m.tokens = read_tokens(f, m.text.vocab_size);
  // Every family preprocesses images by its "image" section, and a "video" section is the sign of
  // a bundle that takes video; the sections' fields are the family's.
  f.require(j.contains("image") && j["image"].is_object(), "missing field 'image' (an object)");
  if (const json* video = f.find("video")) {
    f.require(video->is_object(), "field 'video' is not an object");
    f.require(m.tokens.video_token_id >= 0, "a bundle with a 'video' section needs tokens.video_token_id");
    m.has_video = true;
  }
  m.prompt = read_prompt(f);
  m.document = std::move(document);
  return m;
}

}  // namespace

ManifestFields Manifest::fields() const {
  if (!document)
    throw Error(ErrorCode::kRuntime, "manifest " + model_name + ": no document to read sections from (made by hand?)");
  return ManifestFields(*document, source);
}

Manifest parse_manifest(const std::string& json_text, const std::string& where) {
  auto document = std::make_shared<json>();
  try {
    *document = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, where + ": not valid JSON (" + e.what() + ")");
  }
  try {
    return manifest_from_json(std::move(document), where);
  } catch (const json::exception& e) {  // a shape the checks above did not foresee: still one clear line
    throw Error(ErrorCode::kBundle, where + ": malformed (" + e.what() + ")");
  }
}

Manifest read_manifest(const std::string& bundle_dir) {
  const std::string path = bundle_dir + "/manifest.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error(ErrorCode::kBundle, "not a model bundle: " + path + " not found (export one with tools/export_llava.py)");
  }
  return parse_manifest(read_input_file(path, "bundle manifest", 16 << 20, ErrorCode::kBundle), path);
}

}  // namespace era
