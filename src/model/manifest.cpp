#include "model/manifest.h"

#include <cmath>
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
constexpr int64_t kMaxPinpoints = 64;
constexpr int64_t kMaxPinpointCrops = 16;  // each pinpoint side, in crops of the image size
constexpr int64_t kMaxVideoFrames = 1024;  // era::Video::kMaxFrames

// The node at "a.b.c", or nullptr when some key on the way is absent.
const json* find_node(const json& root, const std::string& dotted) {
  const json* node = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

const json& node_at(const json& root, const std::string& dotted, const std::string& where) {
  const json* node = find_node(root, dotted);
  if (!node) throw Error(ErrorCode::kBundle, where + ": missing field '" + dotted + "'");
  return *node;
}

// The value as the message shows it: short, one line.
std::string shown(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

[[noreturn]] void bad_value(const std::string& where, const std::string& dotted, const json& v, const std::string& rule) {
  throw Error(ErrorCode::kBundle, where + ": " + dotted + " = " + shown(v) + ": " + rule);
}

std::string range_rule(int64_t lo, int64_t hi) {
  return "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

// An integer in [lo, hi]: JSON floats (2.0 included), booleans, strings and integers that do not
// fit int64 are refused, never converted (nlohmann's conversion of 1e31 to an int is undefined).
int64_t int_value(const json& v, const std::string& dotted, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    bad_value(where, dotted, v, range_rule(lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad_value(where, dotted, v, range_rule(lo, hi));
  return x;
}

int64_t int_field(const json& root, const std::string& dotted, const std::string& where, int64_t lo, int64_t hi) {
  return int_value(node_at(root, dotted, where), dotted, where, lo, hi);
}

int64_t int_field_or(const json& root, const std::string& dotted, const std::string& where, int64_t lo, int64_t hi,
                     int64_t fallback) {
  const json* node = find_node(root, dotted);
  return node ? int_value(*node, dotted, where, lo, hi) : fallback;
}

std::string text_field(const json& root, const std::string& dotted, const std::string& where) {
  const json& v = node_at(root, dotted, where);
  if (!v.is_string()) bad_value(where, dotted, v, "must be a string");
  return v.get<std::string>();
}

std::string text_field_or(const json& root, const std::string& dotted, const std::string& where, const std::string& fallback) {
  return find_node(root, dotted) ? text_field(root, dotted, where) : fallback;
}

// Three finite numbers (mean, std), each checked by `ok` with `rule`.
template <typename Ok>
std::array<float, 3> three_numbers(const json& root, const std::string& dotted, const std::string& where, Ok ok,
                                   const std::string& rule) {
  const json& v = node_at(root, dotted, where);
  if (!v.is_array() || v.size() != 3) bad_value(where, dotted, v, "must be a list of 3 numbers");
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string item = dotted + "[" + std::to_string(i) + "]";
    if (!v[i].is_number()) bad_value(where, item, v[i], "must be a number");
    const double x = v[i].get<double>();
    if (!std::isfinite(x) || std::fabs(x) > 1e6 || !ok(x)) bad_value(where, item, v[i], rule);
    out[i] = static_cast<float>(x);
  }
  return out;
}

// A list of integers in [lo, hi], at most max_items long.
std::vector<int64_t> int_list(const json& v, const std::string& dotted, const std::string& where, int64_t lo, int64_t hi,
                              size_t max_items) {
  if (!v.is_array() || v.empty() || v.size() > max_items)
    bad_value(where, dotted, v, "must be a list of 1 to " + std::to_string(max_items) + " integers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(int_value(v[i], dotted + "[" + std::to_string(i) + "]", where, lo, hi));
  return out;
}

// An optional number in (0, hi]; `fallback` when absent.
double positive_number_or(const json& root, const std::string& dotted, const std::string& where, double hi, double fallback) {
  const json* node = find_node(root, dotted);
  if (!node) return fallback;
  if (!node->is_number() || !std::isfinite(node->get<double>()) || !(node->get<double>() > 0) || node->get<double>() > hi)
    bad_value(where, dotted, *node, "must be a number above 0 and at most " + shown(json(hi)));
  return node->get<double>();
}

void require(bool ok, const std::string& where, const std::string& what) {
  if (!ok) throw Error(ErrorCode::kBundle, where + ": " + what);
}

constexpr int64_t kMaxPixels = int64_t{1} << 28;  // 16384 x 16384: far above Qwen's 12845056

// The native-resolution fields of `section` ("image" or "video"), under `root`.
NativeResolution read_native(const json& root, const std::string& section, const std::string& path) {
  NativeResolution n;
  n.patch_size = int_field(root, section + ".patch_size", path, 1, 1024);
  n.merge_size = int_field(root, section + ".merge_size", path, 1, 16);
  n.temporal_patch_size = int_field(root, section + ".temporal_patch_size", path, 1, 16);
  n.min_pixels = int_field(root, section + ".min_pixels", path, 1, kMaxPixels);
  n.max_pixels = int_field(root, section + ".max_pixels", path, 1, kMaxPixels);
  // the pair is at fault, not max_pixels alone
  if (n.min_pixels > n.max_pixels)
    bad_value(path, section + ".min_pixels", json(n.min_pixels),
              "is above " + section + ".max_pixels " + std::to_string(n.max_pixels) + " (min_pixels must not exceed max_pixels)");
  require(n.max_pixels >= n.factor() * n.factor(), path,
          section + ".max_pixels must hold at least one " + std::to_string(n.factor()) + " x " + std::to_string(n.factor()) +
              " block");
  n.arithmetic = text_field_or(root, section + ".resize_arithmetic", path, n.arithmetic);
  require(n.arithmetic == "torch" || n.arithmetic == "pillow", path,
          section + ".resize_arithmetic '" + n.arithmetic + "' is not torch or pillow");
  return n;
}

// The "image" object; field names in errors are spelled from the manifest root ("image.x").
ImageSpec read_image(const json& image, int64_t vision_image_size, const std::string& path) {
  const json root = {{"image", image}};
  const json& j = root;
  ImageSpec im;
  // The one place the layout is read as a string; the model family checks it fits its arch.
  im.aspect_ratio = text_field(j, "image.aspect_ratio", path);
  require(im.aspect_ratio == "pad" || im.aspect_ratio == "crop" || im.aspect_ratio == "anyres" || im.aspect_ratio == "native",
          path, "image.aspect_ratio '" + im.aspect_ratio + "' is not one of pad, crop, anyres, native");
  im.layout = im.aspect_ratio == "anyres"   ? ImageLayout::kAnyres
              : im.aspect_ratio == "crop"   ? ImageLayout::kCrop
              : im.aspect_ratio == "native" ? ImageLayout::kNative
                                            : ImageLayout::kPad;
  if (im.layout == ImageLayout::kNative) im.native = read_native(j, "image", path);
  if (im.layout == ImageLayout::kAnyres) {
    const json& list = node_at(j, "image.grid_pinpoints", path);
    if (!list.is_array() || list.empty() || list.size() > static_cast<size_t>(kMaxPinpoints))
      bad_value(path, "image.grid_pinpoints", list,
                "must be a list of 1 to " + std::to_string(kMaxPinpoints) + " [height, width] pairs");
    const int64_t side_max = kMaxPinpointCrops * vision_image_size;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item = "image.grid_pinpoints[" + std::to_string(i) + "]";
      if (!list[i].is_array() || list[i].size() != 2) bad_value(path, item, list[i], "must be a [height, width] pair");
      const int64_t h = int_value(list[i][0], item + "[0]", path, 1, side_max);
      const int64_t w = int_value(list[i][1], item + "[1]", path, 1, side_max);
      if (h % vision_image_size != 0 || w % vision_image_size != 0)
        bad_value(path, item, list[i], "each side must be a multiple of the image size " + std::to_string(vision_image_size));
      im.grid_pinpoints.push_back({h, w});
    }
  }
  im.size = int_field(j, "image.size", path, vision_image_size, vision_image_size);  // = vision.image_size
  im.mean = three_numbers(
      j, "image.mean", path, [](double) { return true; }, "must be a finite number");
  im.std = three_numbers(
      j, "image.std", path, [](double x) { return x >= 1e-6; },
      "must be a finite number of at least 1e-6 (pixels are divided by it)");
  const json& pad = node_at(j, "image.pad_color", path);
  if (!pad.is_array() || pad.size() != 3) bad_value(path, "image.pad_color", pad, "must be a list of 3 integers from 0 to 255");
  for (size_t i = 0; i < 3; ++i)
    im.pad_color[i] = static_cast<uint8_t>(int_value(pad[i], "image.pad_color[" + std::to_string(i) + "]", path, 0, 255));
  // Bundles exported before these fields existed resized straight to the crop size, bicubic.
  im.shortest_edge = int_field_or(j, "image.shortest_edge", path, 1, kMaxPinpointCrops * vision_image_size, im.size);
  im.resample = text_field_or(j, "image.resample", path, im.resample);
  const auto filter = pil_filter_from_name(im.resample);
  require(filter.has_value(), path,
          "image.resample '" + im.resample + "' is not one of box, bilinear, hamming, bicubic, lanczos");
  im.filter = *filter;
  if (const json* cap = find_node(j, "image.vision_aspect_ratio")) {
    const std::string text = cap->is_string() ? cap->get<std::string>() : "";
    const std::string prefix = "anyres_max_";
    const std::string digits = text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : "";
    require(!digits.empty() && digits.size() <= 3 && digits.find_first_not_of("0123456789") == std::string::npos &&
                std::stoi(digits) > 0,
            path, "image.vision_aspect_ratio must be \"anyres_max_N\" with N a positive tile count, got " + cap->dump());
    require(im.layout == ImageLayout::kAnyres, path, "image.vision_aspect_ratio needs image.aspect_ratio \"anyres\"");
    im.anyres_max_tiles = std::stoi(digits);
  }
  return im;
}

VideoSpec read_video(const json& j, const VisionSpec& vision, const std::string& path) {
  VideoSpec video;
  video.present = true;
  video.size = int_field(j, "video.size", path, vision.image_size, vision.image_size);  // = vision.image_size
  video.resample = text_field_or(j, "video.resample", path, video.resample);
  require(video.resample == "bicubic" || video.resample == "bilinear", path,
          "video.resample '" + video.resample + "' is not bicubic or bilinear");
  video.filter = *pil_filter_from_name(video.resample);
  video.arithmetic = text_field_or(j, "video.resize_arithmetic", path, video.arithmetic);
  require(video.arithmetic == "torch" || video.arithmetic == "pillow", path,
          "video.resize_arithmetic '" + video.arithmetic + "' is not torch or pillow");
  video.mean = three_numbers(
      j, "video.mean", path, [](double) { return true; }, "must be a finite number");
  video.std = three_numbers(
      j, "video.std", path, [](double x) { return x >= 1e-6; },
      "must be a finite number of at least 1e-6 (pixels are divided by it)");
  const int64_t side = vision.image_size / vision.patch_size;
  video.pool_stride = int_field_or(j, "video.pool_stride", path, 1, side, 2);
  if (find_node(j, "video.min_pixels")) {  // native-resolution video (Qwen2.5-VL)
    video.native = read_native(j, "video", path);
    const json& fps = node_at(j, "video.fps", path);
    require(fps.is_number() && fps.get<double>() > 0 && fps.get<double>() <= 1000, path,
            "video.fps must be a number above 0 and at most 1000, got " + shown(fps));
    video.fps = fps.get<double>();
    video.min_frames = int_field_or(j, "video.min_frames", path, 1, kMaxVideoFrames, video.min_frames);
    video.max_frames = int_field_or(j, "video.max_frames", path, video.min_frames, kMaxVideoFrames, video.max_frames);
  }
  return video;
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

namespace {

Manifest manifest_from_json(const json& j, const std::string& path) {
  require(j.is_object() && j.contains("format") && j["format"] == "era-bundle", path,
          "not an era bundle manifest (format != era-bundle)");

  Manifest m;
  m.format_version = static_cast<int>(int_field(j, "format_version", path, 1, 1));  // the one this build reads
  // Which architectures this build serves is the model families' business (family/registry.cpp).
  m.arch = text_field(j, "arch", path);
  m.model_name = text_field_or(j, "model_name", path, m.arch);
  m.dtype = text_field(j, "dtype", path);
  m.attention = text_field_or(j, "exported_with.attention", path, "math");
  m.decoder_api = static_cast<int>(int_field_or(j, "exported_with.decoder_api", path, 0, 1000, 1));
  require(m.decoder_api == kDecoderApi, path,
          "exported with decoder API " + std::to_string(m.decoder_api) + ", this build needs " + std::to_string(kDecoderApi) +
              ": re-export the checkpoint with this version of tools/export_llava.py");
  // Which LibTorch can run the modules depends on the torch that wrote them (model/export_compat.h).
  m.exported_torch = text_field(j, "exported_with.torch", path);
  // int8 Linear weights (tools/era_tools/int8_weights.py): in the decoder, or everywhere
  m.int8_weights = text_field_or(j, "quantization.int8", path, "");
  if (m.int8_weights != "" && m.int8_weights != "decoder" && m.int8_weights != "all")
    bad_value(path, "quantization.int8", json(m.int8_weights), "must be \"decoder\" or \"all\"");
  if (!m.int8_weights.empty()) {
    // int8 bundles exported before the weight-only scheme hold LibTorch's quantised linears
    m.int8_scheme = text_field_or(j, "quantization.int8_scheme", path, "dynamic");
    if (m.int8_scheme != "weight-only" && m.int8_scheme != "dynamic")
      bad_value(path, "quantization.int8_scheme", json(m.int8_scheme), "must be \"weight-only\" or \"dynamic\"");
  }
  // Only the names here; bundle.cpp checks that each is a regular file inside the bundle folder.
  for (auto [field_name, out] : {std::pair{"files.vision", &m.vision_file}, std::pair{"files.projector", &m.projector_file},
                                 std::pair{"files.decoder", &m.decoder_file}, std::pair{"files.tokenizer", &m.tokenizer_file}}) {
    *out = text_field(j, field_name, path);
    if (out->empty() || out->find('\0') != std::string::npos)
      bad_value(path, field_name, json(*out), "must name a file in the bundle");
  }

  auto& v = m.vision;
  v.image_size = int_field(j, "vision.image_size", path, 1, kMaxImageSize);
  v.patch_size = int_field(j, "vision.patch_size", path, 1, v.image_size);
  if (const json* has_cls = find_node(j, "vision.has_cls")) {
    require(has_cls->is_boolean(), path, "vision.has_cls must be true or false");
    v.has_cls = has_cls->get<bool>();
  }
  // SigLIP's patch convolution drops the remainder (384 px / 14 -> 27 patches); CLIP's sizes divide.
  if (v.has_cls && v.image_size % v.patch_size != 0)
    bad_value(path, "vision.patch_size", json(v.patch_size), "must divide vision.image_size " + std::to_string(v.image_size));
  const int64_t side = v.image_size / v.patch_size;
  v.num_patches = int_field(j, "vision.num_patches", path, side * side, side * side);  // (image_size / patch_size)^2
  v.hidden_size = int_field(j, "vision.hidden_size", path, 1, kMaxWidth);
  v.num_heads = int_field(j, "vision.num_heads", path, 1, kMaxHeads);
  if (v.hidden_size % v.num_heads != 0)
    bad_value(path, "vision.num_heads", json(v.num_heads), "must divide vision.hidden_size " + std::to_string(v.hidden_size));
  v.num_layers = int_field(j, "vision.num_layers", path, 1, kMaxLayers);
  v.intermediate_size = int_field_or(j, "vision.intermediate_size", path, 1, kMaxIntermediate, 0);
  // HF's vision_feature_layer: an index into the num_layers + 1 hidden states, negative from the end.
  v.feature_layer = int_field(j, "vision.feature_layer", path, -(v.num_layers + 1), v.num_layers);
  v.layers_run = int_field(j, "vision.layers_run", path, 1, v.num_layers);
  // Bundles exported before these fields existed are single-layer, CLS-dropping ones.
  v.feature_layers = {v.feature_layer};
  if (const json* layers = find_node(j, "vision.feature_layers")) {
    v.feature_layers = int_list(*layers, "vision.feature_layers", path, -(v.num_layers + 1), v.num_layers, 64);
    v.feature_layer_count = static_cast<int64_t>(v.feature_layers.size());
  }
  v.select_strategy = text_field_or(j, "vision.select_strategy", path, "default");
  require(v.select_strategy == "default" || v.select_strategy == "full", path,
          "vision.select_strategy must be \"default\" or \"full\", got \"" + v.select_strategy + "\"");
  v.tokens_per_crop = v.num_patches + (v.keeps_cls() ? 1 : 0);
  v.temporal_patch_size = int_field_or(j, "vision.temporal_patch_size", path, 1, 16, 1);
  v.spatial_merge_size = int_field_or(j, "vision.spatial_merge_size", path, 1, 16, 1);
  v.tokens_per_second = int_field_or(j, "vision.tokens_per_second", path, 0, 1000, 0);
  v.window_size = int_field_or(j, "vision.window_size", path, 1, kMaxWidth, 0);
  if (const json* full = find_node(j, "vision.fullatt_block_indexes")) {
    // may be empty (every block windowed), unlike int_list's lists
    if (!full->is_array() || full->size() > static_cast<size_t>(v.num_layers))
      bad_value(path, "vision.fullatt_block_indexes", *full, "must be a list of at most vision.num_layers block indexes");
    std::vector<int64_t> blocks;
    for (size_t i = 0; i < full->size(); ++i)
      blocks.push_back(
          int_value((*full)[i], "vision.fullatt_block_indexes[" + std::to_string(i) + "]", path, 0, v.num_layers - 1));
    v.fullatt_block_indexes = blocks;
  }

  auto& t = m.text;
  t.hidden_size = int_field(j, "text.hidden_size", path, 1, kMaxWidth);
  t.num_layers = int_field(j, "text.num_layers", path, 1, kMaxLayers);
  t.num_heads = int_field(j, "text.num_heads", path, 1, kMaxHeads);
  t.num_kv_heads = int_field(j, "text.num_kv_heads", path, 1, t.num_heads);
  if (t.num_heads % t.num_kv_heads != 0)
    bad_value(path, "text.num_kv_heads", json(t.num_kv_heads), "must divide text.num_heads " + std::to_string(t.num_heads));
  t.head_dim = int_field(j, "text.head_dim", path, 1, kMaxHeadDim);
  // heads x head_dim = hidden holds for every decoder era serves (LLaMA, Vicuna, Mistral-7B, Yi,
  // Qwen2); the decoder's q_proj/o_proj shapes are checked against both when the modules load.
  if (t.num_heads * t.head_dim != t.hidden_size)
    bad_value(path, "text.head_dim", json(t.head_dim),
              "text.num_heads x text.head_dim must equal text.hidden_size " + std::to_string(t.hidden_size));
  t.rope_theta = positive_number_or(j, "text.rope_theta", path, 1e12, 0);
  t.rms_norm_eps = positive_number_or(j, "text.rms_norm_eps", path, 1, 0);
  t.cache_head_dim = int_field(j, "text.cache_head_dim", path, t.head_dim + 1, t.head_dim + kMaxLarChannels);
  if (t.cache_head_dim % 8 != 0)
    bad_value(path, "text.cache_head_dim", json(t.cache_head_dim),
              "must be a multiple of 8 (head_dim + the LAR channel, padded)");
  t.intermediate_size = int_field(j, "text.intermediate_size", path, 1, kMaxIntermediate);
  t.vocab_size = int_field(j, "text.vocab_size", path, 1, kMaxVocab);
  t.max_position_embeddings = int_field(j, "text.max_position_embeddings", path, 2, kMaxContext);
  // null or absent: no window (LLaMA; Mistral-7B-Instruct-v0.2 sets null)
  if (const json* window = find_node(j, "text.sliding_window"); window && !window->is_null()) {
    t.sliding_window = int_value(*window, "text.sliding_window", path, 1, kMaxContext);
  }
  if (const json* sections = find_node(j, "text.mrope_section")) {
    t.mrope_section = int_list(*sections, "text.mrope_section", path, 1, t.head_dim, 3);
    int64_t sum = 0;
    for (const int64_t x : t.mrope_section) sum += x;
    if (t.mrope_section.size() != 3 || 2 * sum != t.head_dim)
      bad_value(path, "text.mrope_section", *sections,
                "must be 3 sections (temporal, height, width) summing to text.head_dim / 2 = " + std::to_string(t.head_dim / 2));
  }

  m.projector_in = int_field(j, "projector.in_features", path, 1, kMaxIntermediate);
  m.projector_out = int_field(j, "projector.out_features", path, 1, kMaxIntermediate);
  const int64_t merged = v.spatial_merge_size * v.spatial_merge_size;  // Qwen2.5-VL: 2x2 patches a token
  require(m.projector_in == v.hidden_size * v.feature_layer_count * merged && m.projector_out == t.hidden_size, path,
          "projector dims do not connect the vision tower (hidden_size x feature layers x merged patches) to the decoder");
  if (const json* out = find_node(j, "vision.out_hidden_size");
      out && int_value(*out, "vision.out_hidden_size", path, 1, kMaxIntermediate) != m.projector_out) {
    bad_value(path, "vision.out_hidden_size", *out, "must equal projector.out_features " + std::to_string(m.projector_out));
  }

  auto& k = m.tokens;
  const int64_t last_id = t.vocab_size - 1;
  // ids: inside the vocabulary; bos_id -1: the tokenizer has no BOS (Qwen2)
  k.bos_id = int_field(j, "tokens.bos_id", path, -1, last_id);
  k.eos_id = int_field(j, "tokens.eos_id", path, 0, last_id);
  k.pad_id = int_field_or(j, "tokens.pad_id", path, -1, last_id, -1);  // -1: none
  k.image_token_id = int_field(j, "tokens.image_token_id", path, 0, last_id);
  k.video_token_id = int_field_or(j, "tokens.video_token_id", path, -1, last_id, -1);
  require(k.video_token_id < 0 || k.video_token_id != k.image_token_id, path,
          "tokens.video_token_id must differ from tokens.image_token_id");
  k.vision_start_id = int_field_or(j, "tokens.vision_start_id", path, -1, last_id, -1);
  k.vision_end_id = int_field_or(j, "tokens.vision_end_id", path, -1, last_id, -1);
  k.tokenizer_vocab_size = int_field(j, "tokens.tokenizer_vocab_size", path, 1, t.vocab_size);
  if (const json* stops = find_node(j, "tokens.stop_ids")) {
    k.stop_ids = int_list(*stops, "tokens.stop_ids", path, 0, last_id, 64);
  } else {
    k.stop_ids = {k.eos_id};
  }
  if (const json* list = find_node(j, "tokens.added_tokens")) {
    require(list->is_array() && list->size() <= 4096, path, "tokens.added_tokens must be a list of {content, id}");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string item = "tokens.added_tokens[" + std::to_string(i) + "]";
      const json& entry = (*list)[i];
      require(entry.is_object() && entry.contains("content") && entry["content"].is_string() && entry.contains("id"), path,
              item + " must be {\"content\": string, \"id\": integer}");
      AddedToken tok{entry["content"].get<std::string>(), int_value(entry["id"], item + ".id", path, 0, last_id)};
      require(!tok.content.empty(), path, item + ".content is empty");
      k.added_tokens.push_back(tok);
    }
  }

  require(j.contains("image") && j["image"].is_object(), path, "missing field 'image' (an object)");
  m.image = read_image(j["image"], v.image_size, path);
  // The projector's inner width: Qwen2.5-VL's merger keeps its input width, LLaVA's MLP goes to the
  // decoder's (what bundle.cpp checks the module's linear_1 against).
  const bool native = m.image.layout == ImageLayout::kNative;
  const int64_t inner = native ? m.projector_in : m.projector_out;
  if (const json* hidden = find_node(j, "projector.hidden_features");
      hidden && int_value(*hidden, "projector.hidden_features", path, 1, kMaxIntermediate) != inner) {
    bad_value(path, "projector.hidden_features", *hidden,
              std::string("must equal projector.") + (native ? "in_features " : "out_features ") + std::to_string(inner));
  }
  if (const json* video = find_node(j, "video")) {
    require(video->is_object(), path, "field 'video' is not an object");
    m.video = read_video(j, v, path);
    require(k.video_token_id >= 0, path, "a bundle with a 'video' section needs tokens.video_token_id");
    require((m.image.layout == ImageLayout::kNative) == (find_node(j, "video.min_pixels") != nullptr), path,
            "a native-resolution bundle (image.aspect_ratio \"native\") needs video.min_pixels / max_pixels / fps, and only it");
  }

  // An unknown template must not be prompted in some other style: the answers would be garbage.
  const std::string tmpl_name = text_field(j, "prompt.template", path);
  if (!find_prompt_template(tmpl_name, &m.prompt)) {
    std::string known;
    for (const auto& n : known_prompt_templates()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kBundle, path + ": prompt.template '" + tmpl_name + "' is not one this build knows (" + known + ")");
  }
  auto& p = m.prompt;
  // vicuna_v1 has no system text of its own worth guessing: the exporter always writes it.
  p.system =
      p.style == TemplateStyle::kVicunaV1 || find_node(j, "prompt.system") ? text_field(j, "prompt.system", path) : p.system;
  p.user_role = text_field_or(j, "prompt.user_role", path, p.user_role);
  p.assistant_role = text_field_or(j, "prompt.assistant_role", path, p.assistant_role);
  p.sep = text_field_or(j, "prompt.sep", path, p.sep);
  p.image_placeholder = text_field_or(j, "prompt.image_placeholder", path, p.image_placeholder);
  p.video_placeholder = text_field_or(j, "prompt.video_placeholder", path, p.video_placeholder);
  require(!p.video_placeholder.empty() && p.video_placeholder != p.image_placeholder, path,
          "prompt.video_placeholder must be non-empty and differ from prompt.image_placeholder");
  return m;
}

}  // namespace

Manifest parse_manifest(const std::string& json_text, const std::string& where) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, where + ": not valid JSON (" + e.what() + ")");
  }
  try {
    return manifest_from_json(j, where);
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
