#pragma once
// LLaVA-OneVision / LLaVA-Video (SigLIP + Qwen2), llava-hf's LlavaOnevisionForConditionalGeneration.
//
// One image in a prompt: "anyres_max_N" — LLaVA-NeXT's tiles + base crop (384 px), the grid
// re-assembled and unpadded, then, when the grid holds more than N tiles' worth of tokens (by a
// factor > 1.1), downscaled bilinearly to about N tiles' worth, and closed by an image_newline per
// row (onevision_packing.h). Several images in a prompt: each padded to a square in the mean colour
// and seen as one crop, followed by one image_newline (transformers' batch_num_images > 1).
// Prompts: Qwen2's byte-level BPE (no BOS), ChatML templates.
//
// Video (bundles with a "video" section): each frame resized to the tower's square and normalised
// as the video processor does (family/frame_preprocess.h), through the tower and the projector,
// its 27x27 grid pooled bilinearly to 14x14 (pool_frames), the frames' tokens in order and one
// image_newline after the last frame (transformers' get_video_features and forward). Budgets:
// `tokens` is the video's, spread evenly over its frames (scope "crop": each frame keeps
// tokens / frames, at least 1) or one selection over all frames (scope "image", the global
// budget); `keep_ratio` keeps that fraction of every frame.
//
// Budgets (`tokens`): the budget of one image, spread evenly over its crops (scope "crop": each
// crop keeps tokens / crops, at least 1) or one selection over all crops (scope "image");
// `keep_ratio` keeps that fraction of every crop. A reduced image is not downscaled: the budget
// already caps its tokens far below N tiles' worth (docs/methods.md, decisions).
#include "family/llava_base.h"

namespace era {

class LlavaOnevisionFamily final : public LlavaFamilyBase {
 public:
  explicit LlavaOnevisionFamily(const ModelBundle& bundle);

  std::string arch() const override { return "llava-onevision"; }
  std::vector<int64_t> tokenize(const Tokenizer& tokenizer, const std::string& prompt) const override;
  std::vector<cv::Mat> crops(const cv::Mat& rgb) const override;
  std::vector<cv::Mat> crops_in_prompt(const cv::Mat& rgb, int images_in_prompt) const override;
  int64_t max_visual_tokens() const override;
  ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                             const ReductionRequest& request) const override;

  bool takes_video() const override { return sections_.video.has_value(); }
  cv::Mat video_frame(const cv::Mat& rgb) const override;
  torch::Tensor normalize_frame(const cv::Mat& frame) const override;
  int64_t tokens_per_frame() const override;
  int64_t max_video_tokens(int64_t frames) const override { return frames * tokens_per_frame() + 1; }
  ReducedTokens reduce_video(const ImageTokens& video, const MethodSpec& method, const Reducer& reducer,
                             const ReductionRequest& request) const override;

 private:
  ReducedTokens reduce_tiled(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                             const ReductionRequest& request) const;
  torch::Tensor image_newline_;
};

}  // namespace era
