#pragma once
// manifest.json of a model bundle (see docs/bundle-format.md): everything the C++ side needs to
// know about the exported modules, parsed and checked once.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image/pil_resize.h"
#include "text/prompt.h"

namespace era {

// A (height, width) pair, e.g. an anyres grid pinpoint (family/anyres.h).
struct Resolution {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const Resolution& o) const { return height == o.height && width == o.width; }
};

struct VisionSpec {
  int64_t image_size = 336;
  int64_t patch_size = 14;
  int64_t num_patches = 576;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_layers = 0;
  int64_t intermediate_size = 0;    // 0: not in the manifest (older exports)
  int64_t feature_layer = -2;       // the deepest selected layer (where saliency comes from)
  int64_t feature_layer_count = 1;  // HF vision_feature_layer as a list: features concatenated
  // vision.feature_layers as written (HF hidden_states indices, negative from the end; bundles
  // without the field: [feature_layer]). The vision module selects them itself: read only to be
  // checked against it at load.
  std::vector<int64_t> feature_layers;
  int64_t layers_run = 0;
  // HF vision_feature_select_strategy: "default" drops the CLS token, "full" keeps it (one more
  // visual token per crop, which no reduction method's patch geometry covers).
  std::string select_strategy = "default";
  int64_t tokens_per_crop = 576;  // num_patches, + 1 under "full" with a CLS token
  // vision.has_cls (bundles without the field: true). SigLIP (LLaVA-OneVision) has no CLS token:
  // "full" is then the patches alone, and saliency comes from the mean attention each token
  // receives instead of the CLS row.
  bool has_cls = true;
  bool keeps_cls() const { return has_cls && select_strategy == "full"; }
  // Native-resolution towers (Qwen2.5-VL; 1 elsewhere): frames per temporal patch, the side of the
  // patch blocks merged into one visual token, and the M-RoPE time steps per second of video.
  int64_t temporal_patch_size = 1;
  int64_t spatial_merge_size = 1;
  int64_t tokens_per_second = 0;
  // Qwen2.5-VL's window attention (vision.window_size in pixels, 0: not in the manifest) and its
  // full-attention blocks (vision.fullatt_block_indexes): baked into the vision module, read only to
  // be checked against it at load.
  int64_t window_size = 0;
  std::optional<std::vector<int64_t>> fullatt_block_indexes;
};

struct TextSpec {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t cache_head_dim = 0;  // head_dim + the LAR bias channel, padded to a multiple of 8
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  // Mistral's sliding attention window (text.sliding_window; 0 = none). era's decoder attends to
  // every earlier token, which equals sliding-window attention only while the whole sequence fits
  // in the window, so a sequence is limited to the window (context_limit()).
  int64_t sliding_window = 0;
  // Multimodal RoPE (Qwen2.5-VL, text.mrope_section): the head_dim / 2 rotary frequencies split
  // into (temporal, height, width) sections; positions are then (t, h, w) triples. Empty: 1-D RoPE.
  std::vector<int64_t> mrope_section;
  // text.rope_theta and text.rms_norm_eps (0: not in the manifest): baked into the decoder module,
  // read only to be checked against it at load.
  double rope_theta = 0;
  double rms_norm_eps = 0;

  // The most tokens one sequence (prompt + answer) may hold.
  int64_t context_limit() const {
    return sliding_window > 0 && sliding_window < max_position_embeddings ? sliding_window : max_position_embeddings;
  }
};

struct TokenSpec {
  int64_t bos_id = 1;
  int64_t eos_id = 2;
  int64_t pad_id = -1;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;  // tokens.video_token_id; -1: the bundle takes no video
  // Qwen2.5-VL's "<|vision_start|>" / "<|vision_end|>" around each item's pad token (-1: none).
  int64_t vision_start_id = -1;
  int64_t vision_end_id = -1;
  int64_t tokenizer_vocab_size = 0;
  // Generation stops at any of these (tokens.stop_ids; [eos_id] when absent): ChatML answers end
  // with "<|im_end|>", which is not the SentencePiece model's eos.
  std::vector<int64_t> stop_ids;
  // HF added tokens that are one id each in a prompt (tokens.added_tokens), e.g. "<|im_start|>".
  std::vector<AddedToken> added_tokens;
};

// How images become crops (manifest image.aspect_ratio): LLaVA-1.5 expands the image to a square
// ("pad", LLaVA's own evaluation) or not ("crop", HF's CLIPImageProcessor) before the CLIP
// shortest-edge resize + centre crop; LLaVA-NeXT cuts anyres tiles ("anyres").
// Qwen2.5-VL keeps each image's own aspect ratio and size ("native"): resized to multiples of
// patch x merge within a pixel range and cut into patches (family/qwen2_5_vl/).
enum class ImageLayout { kPad, kCrop, kAnyres, kNative };

// Native-resolution preprocessing (Qwen2VLImageProcessor / Qwen2VLVideoProcessor): transformers'
// smart_resize to multiples of patch_size x merge_size with min_pixels <= h x w <= max_pixels,
// the resize in `arithmetic` ("torch": torchvision's uint8 antialiased resize; "pillow"), the
// fused rescale + normalise, then patches of temporal_patch_size frames.
struct NativeResolution {
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  int64_t patch_size = 14;
  int64_t merge_size = 2;
  int64_t temporal_patch_size = 2;
  std::string arithmetic = "torch";
  int64_t factor() const { return patch_size * merge_size; }
};

struct ImageSpec {
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
  NativeResolution native;  // image.aspect_ratio "native" only
};

// How a video's frames become the vision tower's input and visual tokens (manifest "video"; absent:
// the bundle takes no video). LLaVA-OneVision's LlavaOnevisionVideoProcessor + get_video_features:
// each frame resized to size x size (no aspect kept) with torchvision's uint8 antialiased resize,
// rescaled and normalised with the video processor's own mean / std, through the tower and the
// projector, then its token grid pooled bilinearly to ceil(side / pool_stride) per side.
struct VideoSpec {
  bool present = false;
  int64_t size = 384;                // = vision.image_size
  std::string resample = "bicubic";  // "bicubic" or "bilinear"
  PilFilter filter = PilFilter::kBicubic;
  // video.resize_arithmetic: "torch" (torch's native uint8 resize, what transformers' torchvision
  // video processor runs) or "pillow" (Pillow's, what LLaVA's own repository runs on frames).
  std::string arithmetic = "torch";
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  int64_t pool_stride = 2;
  // Native-resolution video (Qwen2.5-VL, an image section "native"): the frames' resize range and
  // patches, and the frame rate a video of given frames is taken to have (M-RoPE time steps).
  NativeResolution native;
  double fps = 2.0;
  // video.min_frames / max_frames (native only): the bounds of a per-second sampling
  // (Qwen2VLVideoProcessor's; bundles without the fields: transformers' 4 and 768).
  int64_t min_frames = 4;
  int64_t max_frames = 768;
};

// The decoder/vision module interface this build calls (BUNDLE_FORMAT.md, "decoder_api").
inline constexpr int kDecoderApi = 2;

struct Manifest {
  int format_version = 1;
  std::string arch;  // the model family (family/registry.cpp): "llava-1.5", "llava-next", "llava-onevision", "qwen2.5-vl"
  std::string model_name;
  std::string dtype;           // dtype the modules were exported in: float32, float16, bfloat16
  std::string attention;       // "math" or "sdpa"
  std::string exported_torch;  // exported_with.torch: torch.__version__ of the exporter, e.g. "2.11.0+cu130"
  std::string int8_weights;    // quantization.int8: "" (none), "decoder" or "all" (model/int8_weights.h)
  // quantization.int8_scheme: "weight-only" (era::int8_linear, model/int8_linear.h) or "dynamic"
  // (LibTorch's quantised linears; what int8 bundles without the field hold); "" without int8.
  std::string int8_scheme;
  int decoder_api = 1;
  std::string vision_file, projector_file, decoder_file, tokenizer_file;
  VisionSpec vision;
  int64_t projector_in = 0, projector_out = 0;  // in: vision hidden x feature layers x merge^2
  TextSpec text;
  TokenSpec tokens;
  ImageSpec image;
  VideoSpec video;
  PromptTemplate prompt;
};

// Reads and validates DIR/manifest.json; throws era::Error(kBundle) naming the field at fault.
Manifest read_manifest(const std::string& bundle_dir);
// The same on manifest text already read; `where` names it in messages. Every number is checked
// for type, range and its relations to the others (docs/bundle-format.md, "Validation"); any
// problem is one era::Error(kBundle) "WHERE: field = value: rule". Never throws anything else.
Manifest parse_manifest(const std::string& json_text, const std::string& where);

// Parses a manifest's "image" object given as JSON text (what read_manifest does for the "image"
// field; for tools and tests that check preprocessing without a whole bundle). `vision_image_size`
// is vision.image_size; errors (kBundle) are prefixed with `where` and name the field.
ImageSpec parse_image_spec(const std::string& image_json, int64_t vision_image_size, const std::string& where);

}  // namespace era
