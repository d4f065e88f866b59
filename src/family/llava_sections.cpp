#include "family/llava_sections.h"

#include <nlohmann/json.hpp>

#include "era/error.h"
#include "family/media_sections.h"

namespace era {
namespace {

using nlohmann::json;

constexpr int64_t kMaxPinpoints = 64;
constexpr int64_t kMaxPinpointCrops = 16;  // each pinpoint side, in crops of the image size

std::vector<Resolution> read_pinpoints(const ManifestFields& f, int64_t image_size) {
  const json& list = f.at("image.grid_pinpoints");
  if (!list.is_array() || list.empty() || list.size() > static_cast<size_t>(kMaxPinpoints))
    f.bad("image.grid_pinpoints", list, "must be a list of 1 to " + std::to_string(kMaxPinpoints) + " [height, width] pairs");
  std::vector<Resolution> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = "image.grid_pinpoints[" + std::to_string(i) + "]";
    if (!list[i].is_array() || list[i].size() != 2) f.bad(item, list[i], "must be a [height, width] pair");
    const int64_t h = f.integer_value(list[i][0], item + "[0]", 1, kMaxPinpointCrops * image_size);
    const int64_t w = f.integer_value(list[i][1], item + "[1]", 1, kMaxPinpointCrops * image_size);
    if (h % image_size != 0 || w % image_size != 0)
      f.bad(item, list[i], "each side must be a multiple of the image size " + std::to_string(image_size));
    out.push_back({h, w});
  }
  return out;
}

// image.vision_aspect_ratio "anyres_max_N" -> N
int64_t read_anyres_cap(const ManifestFields& f, const json& cap, ImageLayout layout) {
  const std::string text = cap.is_string() ? cap.get<std::string>() : "";
  const std::string prefix = "anyres_max_";
  const std::string digits = text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : "";
  f.require(!digits.empty() && digits.size() <= 3 && digits.find_first_not_of("0123456789") == std::string::npos &&
                std::stoi(digits) > 0,
            "image.vision_aspect_ratio must be \"anyres_max_N\" with N a positive tile count, got " + cap.dump());
  f.require(layout == ImageLayout::kAnyres, "image.vision_aspect_ratio needs image.aspect_ratio \"anyres\"");
  return std::stoi(digits);
}

// The "image" object of `f`'s document; field names are spelled from the root ("image.x").
LlavaImageSpec read_llava_image(const ManifestFields& f, int64_t image_size) {
  LlavaImageSpec im;
  im.aspect_ratio = f.text("image.aspect_ratio");
  f.require(im.aspect_ratio == "pad" || im.aspect_ratio == "crop" || im.aspect_ratio == "anyres",
            "image.aspect_ratio '" + im.aspect_ratio + "' is not one of pad, crop, anyres (the LLaVA families' crops)");
  im.layout = im.aspect_ratio == "anyres" ? ImageLayout::kAnyres
              : im.aspect_ratio == "crop" ? ImageLayout::kCrop
                                          : ImageLayout::kPad;
  if (im.layout == ImageLayout::kAnyres) im.grid_pinpoints = read_pinpoints(f, image_size);
  im.size = f.integer("image.size", image_size, image_size);  // = vision.image_size
  im.mean = f.channel_means("image.mean");
  im.std = f.channel_stds("image.std");
  const json& pad = f.at("image.pad_color");
  if (!pad.is_array() || pad.size() != 3) f.bad("image.pad_color", pad, "must be a list of 3 integers from 0 to 255");
  for (size_t i = 0; i < 3; ++i)
    im.pad_color[i] = static_cast<uint8_t>(f.integer_value(pad[i], "image.pad_color[" + std::to_string(i) + "]", 0, 255));
  // Bundles exported before these fields existed resized straight to the crop size, bicubic.
  im.shortest_edge = f.integer_or("image.shortest_edge", 1, kMaxPinpointCrops * image_size, im.size);
  im.resample = f.text_or("image.resample", im.resample);
  im.filter = image_filter(f, "image.resample", im.resample);
  if (const json* cap = f.find("image.vision_aspect_ratio")) im.anyres_max_tiles = read_anyres_cap(f, *cap, im.layout);
  return im;
}

LlavaVideoSpec read_llava_video(const ManifestFields& f, const VisionSpec& vision) {
  f.require(!f.find("video.min_pixels") && !f.find("video.max_pixels"),
            "video.min_pixels / max_pixels are native-resolution fields (image.aspect_ratio \"native\"), which the LLaVA "
            "families' fixed-size frames do not have");
  LlavaVideoSpec video;
  video.size = f.integer("video.size", vision.image_size, vision.image_size);  // = vision.image_size
  video.resample = f.text_or("video.resample", video.resample);
  video.filter = video_filter(f, "video.resample", video.resample);
  video.arithmetic = resize_arithmetic(f, "video.resize_arithmetic", video.arithmetic);
  video.mean = f.channel_means("video.mean");
  video.std = f.channel_stds("video.std");
  video.pool_stride = f.integer_or("video.pool_stride", 1, vision.image_size / vision.patch_size, 2);
  return video;
}

LlavaSections llava_sections_of(const Manifest& manifest) {
  const ManifestFields f = manifest.fields();
  const VisionSpec& v = manifest.vision;
  // LLaVA's projector takes each feature layer's hidden states, concatenated
  if (manifest.projector_in != v.hidden_size * v.feature_layer_count)
    f.bad("projector.in_features", json(manifest.projector_in),
          "must equal vision.hidden_size x the feature layers = " + std::to_string(v.hidden_size * v.feature_layer_count));
  // and its MLP goes to the decoder's width at once (what the module checks hold linear_1 to)
  if (const json* hidden = f.find("projector.hidden_features");
      hidden && f.integer_value(*hidden, "projector.hidden_features", 1, 1 << 20) != manifest.projector_out) {
    f.bad("projector.hidden_features", *hidden, "must equal projector.out_features " + std::to_string(manifest.projector_out));
  }
  LlavaSections s;
  s.image = read_llava_image(f, v.image_size);
  if (manifest.has_video) s.video = read_llava_video(f, v);
  return s;
}

}  // namespace

LlavaSections read_llava_sections(const Manifest& manifest) {
  return guarded_read(manifest, [&] { return llava_sections_of(manifest); });
}

LlavaImageSpec parse_llava_image_spec(const std::string& image_json, int64_t vision_image_size, const std::string& where) {
  json root;
  try {
    root["image"] = json::parse(image_json);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, where + ": not valid JSON (" + e.what() + ")");
  }
  const ManifestFields f(root, where);
  f.require(root["image"].is_object(), "field 'image' is not an object");
  try {
    return read_llava_image(f, vision_image_size);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBundle, where + ": malformed (" + e.what() + ")");
  }
}

}  // namespace era
