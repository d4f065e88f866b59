#include "model/manifest.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "era/error.h"

namespace era {
namespace {

using nlohmann::json;

// Looks up "a.b.c" and converts, turning nlohmann's exceptions into one clear bundle error.
template <typename T>
T field(const json& root, const std::string& dotted, const std::string& where) {
  const json* node = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) {
      throw Error(ErrorCode::kBundle, where + ": missing field '" + dotted + "'");
    }
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  try {
    return node->get<T>();
  } catch (const json::exception&) {
    throw Error(ErrorCode::kBundle, where + ": field '" + dotted + "' has the wrong type");
  }
}

void require(bool ok, const std::string& where, const std::string& what) {
  if (!ok) throw Error(ErrorCode::kBundle, where + ": " + what);
}

// The "image" object; field names in errors are spelled from the manifest root ("image.x").
ImageSpec read_image(const json& image, int64_t vision_image_size, const std::string& path) {
  const json root = {{"image", image}};
  const json& j = root;
  ImageSpec im;
  // The one place the layout is read as a string; the model family checks it fits its arch.
  im.aspect_ratio = field<std::string>(j, "image.aspect_ratio", path);
  require(im.aspect_ratio == "pad" || im.aspect_ratio == "crop" || im.aspect_ratio == "anyres", path,
          "image.aspect_ratio '" + im.aspect_ratio + "' is not one of pad, crop, anyres");
  im.layout = im.aspect_ratio == "anyres" ? ImageLayout::kAnyres
              : im.aspect_ratio == "crop" ? ImageLayout::kCrop
                                          : ImageLayout::kPad;
  if (im.layout == ImageLayout::kAnyres) {
    for (const auto& hw : field<std::vector<std::array<int64_t, 2>>>(j, "image.grid_pinpoints", path)) {
      require(hw[0] > 0 && hw[1] > 0 && hw[0] % vision_image_size == 0 && hw[1] % vision_image_size == 0, path,
              "image.grid_pinpoints must be positive multiples of the image size");
      im.grid_pinpoints.push_back({hw[0], hw[1]});
    }
    require(!im.grid_pinpoints.empty(), path, "image.grid_pinpoints is empty");
  }
  im.size = field<int64_t>(j, "image.size", path);
  im.mean = field<std::array<float, 3>>(j, "image.mean", path);
  im.std = field<std::array<float, 3>>(j, "image.std", path);
  im.pad_color = field<std::array<uint8_t, 3>>(j, "image.pad_color", path);
  require(im.size == vision_image_size, path, "image.size differs from vision.image_size");
  // Bundles exported before these fields existed resized straight to the crop size, bicubic.
  im.shortest_edge = image.contains("shortest_edge") ? field<int64_t>(j, "image.shortest_edge", path) : im.size;
  require(im.shortest_edge > 0 && im.shortest_edge <= 65536, path,
          "image.shortest_edge " + std::to_string(im.shortest_edge) + " is not a positive size");
  if (image.contains("resample")) im.resample = field<std::string>(j, "image.resample", path);
  const auto filter = pil_filter_from_name(im.resample);
  require(filter.has_value(), path,
          "image.resample '" + im.resample + "' is not one of box, bilinear, hamming, bicubic, lanczos");
  im.filter = *filter;
  return im;
}

}  // namespace

ImageSpec parse_image_spec(const std::string& image_json, int64_t vision_image_size, const std::string& where) {
  json j;
  try {
    j = json::parse(image_json);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, where + ": not valid JSON (" + e.what() + ")");
  }
  require(j.is_object(), where, "field 'image' is not an object");
  return read_image(j, vision_image_size, where);
}

Manifest read_manifest(const std::string& bundle_dir) {
  const std::string path = bundle_dir + "/manifest.json";
  std::ifstream in(path);
  if (!in.good()) {
    throw Error(ErrorCode::kBundle, "not a model bundle: " + path + " not found (export one with tools/export_llava.py)");
  }
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, path + ": not valid JSON (" + e.what() + ")");
  }
  require(j.is_object() && j.value("format", "") == "era-bundle", path, "not an era bundle manifest (format != era-bundle)");

  Manifest m;
  m.format_version = field<int>(j, "format_version", path);
  require(m.format_version == 1, path, "format_version " + std::to_string(m.format_version) + " is not supported (this build reads 1)");
  // Which architectures this build serves is the model families' business (family/registry.cpp).
  m.arch = field<std::string>(j, "arch", path);
  m.model_name = j.value("model_name", m.arch);
  m.dtype = field<std::string>(j, "dtype", path);
  m.attention = j.contains("exported_with") ? j["exported_with"].value("attention", "math") : "math";
  m.decoder_api = j.contains("exported_with") ? j["exported_with"].value("decoder_api", 1) : 1;
  require(m.decoder_api == kDecoderApi, path,
          "exported with decoder API " + std::to_string(m.decoder_api) + ", this build needs " + std::to_string(kDecoderApi) +
              ": re-export the checkpoint with this version of tools/export_llava.py");
  // Which LibTorch can run the modules depends on the torch that wrote them (model/export_compat.h).
  m.exported_torch = field<std::string>(j, "exported_with.torch", path);
  m.vision_file = field<std::string>(j, "files.vision", path);
  m.projector_file = field<std::string>(j, "files.projector", path);
  m.decoder_file = field<std::string>(j, "files.decoder", path);
  m.tokenizer_file = field<std::string>(j, "files.tokenizer", path);

  auto& v = m.vision;
  v.image_size = field<int64_t>(j, "vision.image_size", path);
  v.patch_size = field<int64_t>(j, "vision.patch_size", path);
  v.num_patches = field<int64_t>(j, "vision.num_patches", path);
  v.hidden_size = field<int64_t>(j, "vision.hidden_size", path);
  v.num_heads = field<int64_t>(j, "vision.num_heads", path);
  v.num_layers = field<int64_t>(j, "vision.num_layers", path);
  v.feature_layer = field<int64_t>(j, "vision.feature_layer", path);
  v.layers_run = field<int64_t>(j, "vision.layers_run", path);
  require(v.patch_size > 0 && v.image_size % v.patch_size == 0, path, "vision.image_size must be a multiple of vision.patch_size");
  require(v.num_patches == (v.image_size / v.patch_size) * (v.image_size / v.patch_size), path,
          "vision.num_patches does not match image_size/patch_size");
  // Bundles exported before these fields existed are single-layer, CLS-dropping ones.
  if (j["vision"].contains("feature_layers")) {
    require(j["vision"]["feature_layers"].is_array() && !j["vision"]["feature_layers"].empty(), path,
            "vision.feature_layers must be a non-empty list");
    v.feature_layer_count = static_cast<int64_t>(j["vision"]["feature_layers"].size());
  }
  v.select_strategy = j["vision"].value("select_strategy", std::string("default"));
  require(v.select_strategy == "default" || v.select_strategy == "full", path,
          "vision.select_strategy must be \"default\" or \"full\", got \"" + v.select_strategy + "\"");
  v.tokens_per_crop = v.num_patches + (v.keeps_cls() ? 1 : 0);

  m.projector_in = field<int64_t>(j, "projector.in_features", path);
  m.projector_out = field<int64_t>(j, "projector.out_features", path);

  auto& t = m.text;
  t.hidden_size = field<int64_t>(j, "text.hidden_size", path);
  t.num_layers = field<int64_t>(j, "text.num_layers", path);
  t.num_heads = field<int64_t>(j, "text.num_heads", path);
  t.num_kv_heads = field<int64_t>(j, "text.num_kv_heads", path);
  t.head_dim = field<int64_t>(j, "text.head_dim", path);
  t.cache_head_dim = field<int64_t>(j, "text.cache_head_dim", path);
  t.intermediate_size = field<int64_t>(j, "text.intermediate_size", path);
  t.vocab_size = field<int64_t>(j, "text.vocab_size", path);
  t.max_position_embeddings = field<int64_t>(j, "text.max_position_embeddings", path);
  // null or absent: no window (LLaMA; Mistral-7B-Instruct-v0.2 sets null)
  if (j["text"].contains("sliding_window") && !j["text"]["sliding_window"].is_null()) {
    t.sliding_window = field<int64_t>(j, "text.sliding_window", path);
    require(t.sliding_window > 0, path, "text.sliding_window must be positive or null");
  }
  require(t.cache_head_dim > t.head_dim && t.cache_head_dim % 8 == 0, path,
          "text.cache_head_dim must exceed head_dim and be a multiple of 8");
  require(m.projector_in == v.hidden_size * v.feature_layer_count && m.projector_out == t.hidden_size, path,
          "projector dims do not connect the vision tower (hidden_size x feature layers) to the decoder");

  auto& k = m.tokens;
  k.bos_id = field<int64_t>(j, "tokens.bos_id", path);
  k.eos_id = field<int64_t>(j, "tokens.eos_id", path);
  k.pad_id = j["tokens"].value("pad_id", int64_t{-1});
  k.image_token_id = field<int64_t>(j, "tokens.image_token_id", path);
  k.tokenizer_vocab_size = field<int64_t>(j, "tokens.tokenizer_vocab_size", path);
  require(k.image_token_id >= 0 && k.image_token_id < t.vocab_size, path, "tokens.image_token_id is outside the vocabulary");
  k.stop_ids = j["tokens"].contains("stop_ids") ? field<std::vector<int64_t>>(j, "tokens.stop_ids", path)
                                                 : std::vector<int64_t>{k.eos_id};
  require(!k.stop_ids.empty(), path, "tokens.stop_ids is empty");
  for (const int64_t id : k.stop_ids) {
    require(id >= 0 && id < t.vocab_size, path, "tokens.stop_ids: " + std::to_string(id) + " is outside the vocabulary");
  }
  if (j["tokens"].contains("added_tokens")) {
    const auto& list = j["tokens"]["added_tokens"];
    require(list.is_array(), path, "tokens.added_tokens must be a list of {content, id}");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item = "tokens.added_tokens[" + std::to_string(i) + "]";
      require(list[i].is_object() && list[i].contains("content") && list[i]["content"].is_string() &&
                  list[i].contains("id") && list[i]["id"].is_number_integer(),
              path, item + " must be {\"content\": string, \"id\": integer}");
      AddedToken tok{list[i]["content"].get<std::string>(), list[i]["id"].get<int64_t>()};
      require(!tok.content.empty(), path, item + ".content is empty");
      require(tok.id >= 0 && tok.id < t.vocab_size, path, item + ".id " + std::to_string(tok.id) + " is outside the vocabulary");
      k.added_tokens.push_back(tok);
    }
  }

  require(j.contains("image"), path, "missing field 'image'");
  m.image = read_image(j["image"], v.image_size, path);

  // An unknown template must not be prompted in some other style: the answers would be garbage.
  const std::string tmpl_name = field<std::string>(j, "prompt.template", path);
  if (!find_prompt_template(tmpl_name, &m.prompt)) {
    std::string known;
    for (const auto& n : known_prompt_templates()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kBundle, path + ": prompt.template '" + tmpl_name + "' is not one this build knows (" + known + ")");
  }
  auto& p = m.prompt;
  // vicuna_v1 has no system text of its own worth guessing: the exporter always writes it.
  p.system = p.style == TemplateStyle::kVicunaV1 || j["prompt"].contains("system")
                 ? field<std::string>(j, "prompt.system", path) : p.system;
  p.user_role = j["prompt"].value("user_role", p.user_role);
  p.assistant_role = j["prompt"].value("assistant_role", p.assistant_role);
  p.sep = j["prompt"].value("sep", p.sep);
  p.image_placeholder = j["prompt"].value("image_placeholder", p.image_placeholder);
  return m;
}

}  // namespace era
