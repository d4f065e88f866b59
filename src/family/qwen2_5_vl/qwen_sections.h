#pragma once
// Qwen2.5-VL's own manifest sections: the native-resolution "image" and "video" processors
// (Qwen2VLImageProcessor / Qwen2VLVideoProcessor), the tower's values beyond the common vision
// fields (temporal patch, merge, window attention, full-attention blocks, M-RoPE seconds) and the
// vision markers. Parsed from the manifest document by the family; refusals name the field.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image/pil_resize.h"
#include "model/manifest.h"

namespace era {

// Native-resolution preprocessing: transformers' smart_resize to multiples of patch_size x
// merge_size with min_pixels <= h x w <= max_pixels, the resize in `arithmetic` ("torch":
// torchvision's uint8 antialiased resize; "pillow"), the fused rescale + normalise, then patches
// of temporal_patch_size frames.
struct NativeResolution {
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  int64_t patch_size = 14;
  int64_t merge_size = 2;
  int64_t temporal_patch_size = 2;
  std::string arithmetic = "torch";
  int64_t factor() const { return patch_size * merge_size; }
};

// One processor's settings ("image" or "video").
struct NativeMediaSpec {
  NativeResolution native;
  PilFilter filter = PilFilter::kBicubic;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
};

struct NativeVideoSpec : NativeMediaSpec {
  double fps = 2.0;  // the frame rate a video of given frames is taken to have (M-RoPE time steps)
  // video.min_frames / max_frames: the bounds of a per-second sampling (Qwen2VLVideoProcessor's;
  // bundles without the fields: transformers' 4 and 768).
  int64_t min_frames = 4;
  int64_t max_frames = 768;
};

struct Qwen25VlSections {
  // The tower: frames per temporal patch, the side of the patch blocks merged into one visual
  // token, the M-RoPE time steps per second of video.
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t tokens_per_second = 0;
  // Window attention (vision.window_size in pixels, 0: not in the manifest) and the full-attention
  // blocks (vision.fullatt_block_indexes): baked into the vision module, read to be checked
  // against it at load and for era_bench's FLOPs.
  int64_t window_size = 0;
  std::optional<std::vector<int64_t>> fullatt_block_indexes;
  // "<|vision_start|>" / "<|vision_end|>" around each item's pad token (-1: not in the manifest).
  int64_t vision_start_id = -1;
  int64_t vision_end_id = -1;
  NativeMediaSpec image;
  std::optional<NativeVideoSpec> video;  // absent: the bundle takes no video
};

// Throws era::Error(kBundle) naming the field.
Qwen25VlSections read_qwen25vl_sections(const Manifest& manifest);

}  // namespace era
