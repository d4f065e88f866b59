#pragma once
// The LLaVA families' own manifest sections (LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision): how an image
// becomes fixed-size crops ("image": pad / crop / anyres, the CLIP resize, the anyres pinpoints
// and cap) and how a video's frames are prepared ("video", LLaVA-OneVision). Parsed from the
// manifest document by the families themselves; refusals name the field as the common manifest's
// do (model/manifest_fields.h).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "family/anyres.h"
#include "image/pil_resize.h"
#include "model/manifest.h"

namespace era {

// How images become crops (image.aspect_ratio): LLaVA-1.5 expands the image to a square ("pad",
// LLaVA's own evaluation) or not ("crop", HF's CLIPImageProcessor) before the CLIP shortest-edge
// resize + centre crop; LLaVA-NeXT and OneVision cut anyres tiles ("anyres").
enum class ImageLayout { kPad, kCrop, kAnyres };

struct LlavaImageSpec {
  std::string aspect_ratio = "pad";  // as the manifest spells it: "pad", "crop" or "anyres"
  ImageLayout layout = ImageLayout::kPad;
  std::vector<Resolution> grid_pinpoints;  // anyres candidates, (height, width) as HF reads them
  int64_t size = 336;                      // the centre crop (the vision tower's image size)
  int64_t shortest_edge = 336;             // the CLIP resize target of the shortest edge (bundles without the field: size)
  std::string resample = "bicubic";        // as the manifest spells it (bundles without the field: bicubic)
  PilFilter filter = PilFilter::kBicubic;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  std::array<uint8_t, 3> pad_color{};
  // image.vision_aspect_ratio "anyres_max_N" (LLaVA-OneVision): an unpadded tile grid of more than
  // N tiles' worth of tokens (by a factor > 1.1) is downscaled bilinearly to about N tiles' worth.
  // 0: no cap (LLaVA-NeXT).
  int64_t anyres_max_tiles = 0;
};

// How a video's frames become the vision tower's input and visual tokens (LLaVA-OneVision's
// LlavaOnevisionVideoProcessor + get_video_features): each frame resized to size x size (no aspect
// kept), rescaled and normalised with the video processor's own mean / std, through the tower and
// the projector, then its token grid pooled bilinearly to ceil(side / pool_stride) per side.
struct LlavaVideoSpec {
  int64_t size = 384;                // = vision.image_size
  std::string resample = "bicubic";  // "bicubic" or "bilinear"
  PilFilter filter = PilFilter::kBicubic;
  // video.resize_arithmetic: "torch" (torch's native uint8 resize, what transformers' torchvision
  // video processor runs) or "pillow" (Pillow's, what LLaVA's own repository runs on frames).
  std::string arithmetic = "torch";
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  int64_t pool_stride = 2;
};

struct LlavaSections {
  LlavaImageSpec image;
  std::optional<LlavaVideoSpec> video;  // absent: the bundle takes no video
};

// The sections of a LLaVA family's manifest, and the projector's input width (the tower's width x
// its feature layers); throws era::Error(kBundle) naming the field.
LlavaSections read_llava_sections(const Manifest& manifest);

// The "image" object alone, as JSON text (tools and tests that check preprocessing without a whole
// bundle); `vision_image_size` is vision.image_size; errors name `where` and the field.
LlavaImageSpec parse_llava_image_spec(const std::string& image_json, int64_t vision_image_size, const std::string& where);

}  // namespace era
