#pragma once
// manifest.json of a model bundle (see docs/bundle-format.md): what every family's bundle has,
// parsed and checked once. The sections of one family (how its images and videos are
// preprocessed, its tower's own values) are that family's to parse (family/<name>/).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/manifest_fields.h"
#include "text/prompt.h"

namespace era {

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
  // The MLP's inner width: intermediate_size, or CLIP's 4 x hidden where the manifest has none.
  int64_t mlp_width() const { return intermediate_size > 0 ? intermediate_size : 4 * hidden_size; }
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
  int64_t tokenizer_vocab_size = 0;
  // Generation stops at any of these (tokens.stop_ids; [eos_id] when absent): ChatML answers end
  // with "<|im_end|>", which is not the SentencePiece model's eos.
  std::vector<int64_t> stop_ids;
  // HF added tokens that are one id each in a prompt (tokens.added_tokens), e.g. "<|im_start|>".
  std::vector<AddedToken> added_tokens;
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
  // in: what the family's vision side hands the projector (its checks); out: text.hidden_size
  int64_t projector_in = 0, projector_out = 0;
  TextSpec text;
  TokenSpec tokens;
  PromptTemplate prompt;
  bool has_video = false;  // a "video" section is present (its fields are the family's)

  // Where the manifest came from ("DIR/manifest.json"), for messages.
  std::string source;
  // The whole document as read: the sections only one family has ("image", "video", a family's own
  // vision or token fields) are parsed and checked by that family (family/<name>/, e.g.
  // read_llava_sections), through fields().
  std::shared_ptr<const nlohmann::json> document;
  // Throws era::Error(kRuntime) for a Manifest made by hand, without a document.
  ManifestFields fields() const;
};

// Reads and validates DIR/manifest.json; throws era::Error(kBundle) naming the field at fault.
Manifest read_manifest(const std::string& bundle_dir);
// The same on manifest text already read; `where` names it in messages. Every number is checked
// for type, range and its relations to the others (docs/bundle-format.md, "Validation"); any
// problem is one era::Error(kBundle) "WHERE: field = value: rule". Never throws anything else.
Manifest parse_manifest(const std::string& json_text, const std::string& where);

}  // namespace era
