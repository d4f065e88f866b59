#include "family/qwen2_5_vl/qwen_sections.h"

#include <nlohmann/json.hpp>

#include "family/media_sections.h"

namespace era {
namespace {

using nlohmann::json;

constexpr int64_t kMaxNativePixels = int64_t{1} << 28;  // 16384 x 16384: far above Qwen's 12845056
constexpr int64_t kMaxNativeVideoFrames = 1024;         // era::Video::kMaxFrames

// The native-resolution fields of `section` ("image" or "video").
NativeResolution read_native_section(const ManifestFields& f, const std::string& section) {
  NativeResolution n;
  n.patch_size = f.integer(section + ".patch_size", 1, 1024);
  n.merge_size = f.integer(section + ".merge_size", 1, 16);
  n.temporal_patch_size = f.integer(section + ".temporal_patch_size", 1, 16);
  n.min_pixels = f.integer(section + ".min_pixels", 1, kMaxNativePixels);
  n.max_pixels = f.integer(section + ".max_pixels", 1, kMaxNativePixels);
  // the pair is at fault, not max_pixels alone
  if (n.min_pixels > n.max_pixels)
    f.bad(section + ".min_pixels", json(n.min_pixels),
          "is above " + section + ".max_pixels " + std::to_string(n.max_pixels) + " (min_pixels must not exceed max_pixels)");
  f.require(n.max_pixels >= n.factor() * n.factor(), section + ".max_pixels must hold at least one " +
                                                         std::to_string(n.factor()) + " x " + std::to_string(n.factor()) +
                                                         " block");
  n.arithmetic = resize_arithmetic(f, section + ".resize_arithmetic", n.arithmetic);
  return n;
}

NativeVideoSpec read_native_video(const ManifestFields& f, const VisionSpec& vision) {
  NativeVideoSpec video;
  f.require(f.find("video.min_pixels") != nullptr,
            "a native-resolution bundle's video section needs video.min_pixels / max_pixels / fps");
  f.integer("video.size", vision.image_size, vision.image_size);  // = vision.image_size, as the exporter writes it
  video.filter = video_filter(f, "video.resample", f.text_or("video.resample", "bicubic"));
  video.mean = f.channel_means("video.mean");
  video.std = f.channel_stds("video.std");
  video.native = read_native_section(f, "video");
  const json& fps = f.at("video.fps");
  f.require(fps.is_number() && fps.get<double>() > 0 && fps.get<double>() <= 1000,
            "video.fps must be a number above 0 and at most 1000, got " + shown_json(fps));
  video.fps = fps.get<double>();
  video.min_frames = f.integer_or("video.min_frames", 1, kMaxNativeVideoFrames, video.min_frames);
  video.max_frames = f.integer_or("video.max_frames", video.min_frames, kMaxNativeVideoFrames, video.max_frames);
  return video;
}

Qwen25VlSections qwen_sections_of(const Manifest& m) {
  const ManifestFields f = m.fields();
  const VisionSpec& v = m.vision;
  Qwen25VlSections s;
  s.temporal_patch_size = f.integer_or("vision.temporal_patch_size", 1, 16, 1);
  s.spatial_merge_size = f.integer_or("vision.spatial_merge_size", 1, 16, 1);
  s.tokens_per_second = f.integer_or("vision.tokens_per_second", 0, 1000, 0);
  s.window_size = f.integer_or("vision.window_size", 1, 65536, 0);
  if (const json* full = f.find("vision.fullatt_block_indexes")) {
    // may be empty (every block windowed), unlike integers()'s lists
    if (!full->is_array() || full->size() > static_cast<size_t>(v.num_layers))
      f.bad("vision.fullatt_block_indexes", *full, "must be a list of at most vision.num_layers block indexes");
    std::vector<int64_t> blocks;
    for (size_t i = 0; i < full->size(); ++i)
      blocks.push_back(
          f.integer_value((*full)[i], "vision.fullatt_block_indexes[" + std::to_string(i) + "]", 0, v.num_layers - 1));
    s.fullatt_block_indexes = blocks;
  }
  // The merger takes 2x2 merged patches and keeps that width inside (4C -> 4C -> D).
  const int64_t merged_width = v.hidden_size * s.spatial_merge_size * s.spatial_merge_size;
  if (m.projector_in != merged_width)
    f.bad("projector.in_features", json(m.projector_in),
          "must equal vision.hidden_size x vision.spatial_merge_size^2 = " + std::to_string(merged_width));
  if (const json* hidden = f.find("projector.hidden_features");
      hidden && f.integer_value(*hidden, "projector.hidden_features", 1, 1 << 20) != m.projector_in) {
    f.bad("projector.hidden_features", *hidden, "must equal projector.in_features " + std::to_string(m.projector_in));
  }
  if (const json* out = f.find("vision.out_hidden_size");
      out && f.integer_value(*out, "vision.out_hidden_size", 1, 1 << 20) != m.projector_out) {
    f.bad("vision.out_hidden_size", *out, "must equal projector.out_features " + std::to_string(m.projector_out));
  }
  const int64_t last_id = m.text.vocab_size - 1;
  s.vision_start_id = f.integer_or("tokens.vision_start_id", -1, last_id, -1);
  s.vision_end_id = f.integer_or("tokens.vision_end_id", -1, last_id, -1);

  f.require(!m.text.mrope_section.empty(), "text.mrope_section is missing (" + m.arch + " needs it)");
  f.require(!v.keeps_cls(), "vision.has_cls must be false for " + m.arch);

  const std::string aspect = f.text("image.aspect_ratio");
  f.require(aspect == "native", "image.aspect_ratio '" + aspect + "' does not fit architecture " + m.arch + " (\"native\")");
  f.integer("image.size", v.image_size, v.image_size);  // = vision.image_size, as the exporter writes it
  s.image.filter = image_filter(f, "image.resample", f.text_or("image.resample", "bicubic"));
  s.image.mean = f.channel_means("image.mean");
  s.image.std = f.channel_stds("image.std");
  s.image.native = read_native_section(f, "image");
  const NativeResolution& n = s.image.native;
  f.require(
      n.merge_size == s.spatial_merge_size && n.temporal_patch_size == s.temporal_patch_size && n.patch_size == v.patch_size,
      "image.patch_size / merge_size / temporal_patch_size differ from the vision section's");
  if (m.has_video) s.video = read_native_video(f, v);
  return s;
}

}  // namespace

Qwen25VlSections read_qwen25vl_sections(const Manifest& manifest) {
  return guarded_read(manifest, [&] { return qwen_sections_of(manifest); });
}

}  // namespace era
