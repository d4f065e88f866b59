#pragma once
// Qwen2.5-VL (transformers' Qwen2_5_VLForConditionalGeneration): a native-resolution vision
// transformer (14 px patches, 2 frames a temporal patch, window attention, 2x2 patch merger), the
// Qwen2 decoder with multimodal RoPE, Qwen2's byte-level BPE and ChatML prompts.
//
// Images and videos keep their own size: smart_resize to multiples of 28 within min/max pixels
// (the request's, else the bundle's), cut into flat patches (native_patches.h); the whole prompt's
// items go through the tower at once with their (t, h, w) grids. One visual token is one 2x2 block
// of patches; an image brings (h/2)(w/2) tokens, a video t(h/2)(w/2) (t = frames / 2).
//
// Reduction: an image is one selection over its tokens with the image's budget; a video is
// reduced per temporal patch (scope "crop": tokens / t each, or keep_ratio of each) or by one
// selection over all its tokens (scope "image"). The saliency has no CLS token to come from: it
// is the mean attention each token receives in the tower's last block, a full-attention block
// (docs/methods.md, decisions: "Qwen2.5-VL saliency").
//
// Positions (mrope_positions.h): transformers' get_rope_index; a reduced item's kept tokens keep
// their original (t, h, w) positions (ReductionRequest::positions "original"), or take
// consecutive text-like positions ("compact").
#include "family/model_family.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "family/vision_cost.h"

namespace era {

// The module checks (load_bundle's family_checks): the native tower and the merger MLP.
void check_qwen25vl_modules(const ModelBundle& bundle);

// The FLOPs (era_bench) of the native tower over items of given grids: the Conv3d patch embedding,
// per layer the fused q/k/v, the output projection and the gated MLP on every patch, and attention
// within each temporal slice (the full-attention blocks) or each window of merge units (the
// others); the merger MLP on every merged token.
VisionCost qwen25vl_vision_cost(const Manifest& manifest);
// The same with the sections already read.
VisionCost qwen25vl_tower_cost(const Manifest& manifest, const Qwen25VlSections& sections);

class Qwen25VlFamily final : public ModelFamily,
                             public PromptFormat,
                             public VisualProcessor,
                             public TokenPacker,
                             public PositionScheme {
 public:
  explicit Qwen25VlFamily(const ModelBundle& bundle);

  std::string arch() const override { return "qwen2.5-vl"; }
  const PromptFormat& prompt() const override { return *this; }
  const VisualProcessor& processor() const override { return *this; }
  const TokenPacker& packer() const override { return *this; }
  const PositionScheme& positions() const override { return *this; }

  // PromptFormat
  std::string format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images, int num_videos,
                            const std::optional<std::string>& system) const override;
  std::vector<int64_t> tokenize(const Tokenizer& tokenizer, const std::string& prompt) const override;
  // In prompt text (a prompt sent without the template): the pad tokens, as the chat template writes them.
  const std::string& image_placeholder() const override { return image_pad_; }
  const std::string& video_placeholder() const override { return video_pad_; }

  // VisualProcessor: items at their own size, as patches with their (t, h, w) grid.
  VisualItem image(const cv::Mat& rgb, const ItemContext& context) const override;
  bool takes_video() const override { return sections_.video.has_value(); }
  // Whole temporal patches, within the video processor's min_frames / max_frames.
  FrameSampling video_sampling(int frames, double fps) const override;
  VisualItem video(const std::vector<cv::Mat>& frames, double sampled_fps, const ItemContext& context) const override;
  int64_t max_video_tokens(int64_t frames) const override;
  VisionBatch batch(const std::vector<VisualItem>& items) const override;
  Error no_video() const override;

  // TokenPacker
  int64_t max_visual_tokens() const override;
  int64_t item_tokens(const ImageTokens& item) const override;
  ReducedTokens reduce(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                       const ReductionRequest& request) const override;

  // PositionScheme
  torch::Tensor position_ids(const PromptSequence& sequence) const override;

 private:
  // transformers' get_rope_index: the M-RoPE time step between temporal patches of a video
  // sampled at `sampled_fps` (0: the bundle's video.fps).
  int64_t time_step(double sampled_fps) const;
  ReducedTokens reduce_item(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                            const ReductionRequest& request) const;
  const Manifest& manifest_;
  const std::string bundle_dir_;
  const Qwen25VlSections sections_;
  std::string image_pad_ = "<|image_pad|>", video_pad_ = "<|video_pad|>";
  std::string vision_start_ = "<|vision_start|>", vision_end_ = "<|vision_end|>";
};

}  // namespace era
