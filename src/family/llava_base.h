#pragma once
// What the LLaVA families share: LLaVA's conversation template and tokenizer_image_token, CLIP
// normalisation, fixed-size crops stacked for the tower, and a LLaMA-style decoder with
// positions 0..L-1. The families differ in their crops and visual tokens only (and
// LLaVA-OneVision in its tokenizer and video).
#include "family/clip_preprocess.h"
#include "family/llava_sections.h"
#include "family/model_family.h"
#include "family/vision_cost.h"

#include <initializer_list>

namespace era {

// The LLaVA families' module checks (load_bundle's family_checks): the CLIP / SigLIP tower and
// the projector against the manifest.
void check_llava_modules(const ModelBundle& bundle);

// The LLaVA families' FLOPs (era_bench): a crop's patches and CLS token through the layers_run
// layers of a CLIP / SigLIP tower (q/k/v/o, a two-matrix MLP, the attention products), and its
// patch tokens through the two-layer projector.
VisionCost llava_vision_cost(const Manifest& manifest);

// The CLIP preprocessing settings a manifest's "image" section asks for.
ClipImageConfig clip_config(const LlavaImageSpec& image);

class LlavaFamilyBase : public ModelFamily,
                        public PromptFormat,
                        public VisualProcessor,
                        public TokenPacker,
                        public PositionScheme {
 public:
  explicit LlavaFamilyBase(const ModelBundle& bundle);

  const PromptFormat& prompt() const override { return *this; }
  const VisualProcessor& processor() const override { return *this; }
  const TokenPacker& packer() const override { return *this; }
  const PositionScheme& positions() const override { return *this; }

  // PromptFormat
  std::string format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images, int num_videos,
                            const std::optional<std::string>& system) const override;
  std::vector<int64_t> tokenize(const Tokenizer& tokenizer, const std::string& prompt) const override;
  const std::string& image_placeholder() const override { return manifest_.prompt.image_placeholder; }
  const std::string& video_placeholder() const override { return manifest_.prompt.video_placeholder; }

  // VisualProcessor: an image's crops (crops_in_prompt), a video's frames (video_frame), each
  // normalised to float32 [3, S, S] and stacked.
  VisualItem image(const cv::Mat& rgb, const ItemContext& context) const override;
  VisualItem video(const std::vector<cv::Mat>& frames, double sampled_fps, const ItemContext& context) const override;
  VisionBatch batch(const std::vector<VisualItem>& items) const override;
  Error no_video() const override;

  // TokenPacker: an image brings tokens_per_crop() per crop, a video tokens_per_frame() per frame.
  int64_t item_tokens(const ImageTokens& item) const override;
  ReducedTokens reduce(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                       const ReductionRequest& request) const override;

  // PositionScheme
  torch::Tensor position_ids(const PromptSequence& sequence) const override;

 protected:
  // One decoded RGB image (CV_8UC3) -> the uint8 RGB crops the vision tower sees, in order.
  virtual std::vector<cv::Mat> crops(const cv::Mat& rgb) const = 0;
  // The crops of one image of a prompt with `images_in_prompt` images: families that treat a
  // multi-image prompt differently (LLaVA-OneVision pads each to one square crop) override it.
  virtual std::vector<cv::Mat> crops_in_prompt(const cv::Mat& rgb, int images_in_prompt) const {
    (void)images_in_prompt;
    return crops(rgb);
  }
  // One image's tokens for the decoder (TokenPacker::reduce of an image).
  virtual ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                     const ReductionRequest& request) const = 0;
  // Video (families that take it): one decoded RGB frame -> the uint8 RGB frame the tower sees,
  // that frame -> float32 [3, S, S], the tokens one frame brings (after the family's pooling) and
  // a video's tokens. The defaults refuse.
  virtual cv::Mat video_frame(const cv::Mat& rgb) const;
  virtual torch::Tensor normalize_frame(const cv::Mat& frame) const;
  virtual int64_t tokens_per_frame() const;
  virtual ReducedTokens reduce_video(const ImageTokens& video, const MethodSpec& method, const Reducer& reducer,
                                     const ReductionRequest& request) const;

  // Vision tokens of one crop (576 for CLIP ViT-L/14 at 336 px).
  int64_t tokens_per_crop() const { return manifest_.vision.tokens_per_crop; }
  // Refuses a manifest whose image layout is none of `allowed` (kBundle, naming the field).
  void require_layout(std::initializer_list<ImageLayout> allowed) const;
  torch::Tensor normalize(const cv::Mat& crop) const;

  const Manifest& manifest_;
  const std::string bundle_dir_;
  const LlavaSections sections_;  // the manifest's image and video sections
  const ClipImageConfig clip_;
};

}  // namespace era
