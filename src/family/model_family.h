#pragma once
// The model-family seam: everything that differs between model families (LLaVA-1.5, LLaVA-NeXT,
// LLaVA-OneVision) sits behind this one interface, chosen from the bundle
// manifest's `arch`. The pipeline (src/pipeline/) calls only this interface; each family lives in
// its own folder (family/llava15/, family/llava_next/, family/llava_onevision/) and is registered
// in family/registry.cpp.
//
// What a family decides:
//   - the prompt: the conversation template and where image placeholders go, and how the prompt
//     becomes token ids with one image token per image;
//   - image preprocessing and tiling: one decoded image -> the crops the vision tower sees;
//   - the visual tokens of one image: how a method's budget is split (per crop, per image), how
//     the vision output is handed to the method, how the tokens are packed (unpad, newlines);
//   - video (families that take it): frame preprocessing, pooling and packing of a video's frames;
//   - the decoder's position ids for the spliced sequence.
// Adding a family: a folder with a class implementing ModelFamily, and one line in
// family/registry.cpp mapping its manifest `arch` to it (docs/architecture.md, "Adding a model family").
#include <opencv2/core.hpp>
#include <torch/script.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "era/era.h"
#include "era/methods.h"
#include "image/native_patches.h"
#include "model/bundle.h"
#include "model/vision_encoder.h"
#include "reduce/reducer.h"
#include "reduce/registry.h"
#include "runtime/sequence.h"
#include "text/tokenizer.h"

namespace era {

// One image's share of a vision pass: crops [first, first + count) of `vision`.
struct ImageTokens {
  const VisionOutput* vision = nullptr;
  int64_t first = 0, count = 1;
  std::array<int64_t, 2> size{};  // (height, width) of the decoded image
  // [M, D] the instruction's text embeddings, for methods that rank against it (else undefined).
  torch::Tensor instruction;
  // Native-resolution families: the item's grid (in patches), its first token in the vision
  // pass's one row of tokens, and the M-RoPE time step between its temporal patches.
  GridThw grid;
  int64_t first_token = 0;
  int64_t time_step = 1;
};

// A request's pixel range for native-resolution families (0: the bundle's min / max pixels).
struct PixelRange {
  int64_t min_pixels = 0, max_pixels = 0;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // The manifest `arch` this family serves ("llava-1.5").
  virtual std::string arch() const = 0;

  // ---- prompt ---------------------------------------------------------------------------------
  // The prompt text of a conversation (`history`, then the new `question`) with `num_images`
  // images, in the bundle's template; `system` replaces the template's system text when set
  // (throws era::Error(kPrompt) if the placeholders do not match the images).
  virtual std::string format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images, int num_videos,
                                    const std::optional<std::string>& system) const = 0;
  // Token ids of a formatted prompt, with one image token id where each image goes; the
  // tokenizer's BOS / EOS pieces written in the text (a conversation's turn ends) become their ids.
  virtual std::vector<int64_t> tokenize(const Tokenizer& tokenizer, const std::string& prompt) const = 0;
  virtual const std::string& image_placeholder() const = 0;
  // The video placeholder in prompt text (a prompt sent without the template).
  virtual const std::string& video_placeholder() const = 0;

  // ---- images ---------------------------------------------------------------------------------
  // One decoded RGB image (CV_8UC3) -> the uint8 RGB crops the vision tower sees, in order.
  virtual std::vector<cv::Mat> crops(const cv::Mat& rgb) const = 0;
  // The crops of one image of a prompt with `images_in_prompt` images: families that treat a
  // multi-image prompt differently (LLaVA-OneVision pads each to one square crop) override it.
  virtual std::vector<cv::Mat> crops_in_prompt(const cv::Mat& rgb, int images_in_prompt) const {
    (void)images_in_prompt;
    return crops(rgb);
  }
  // One crop -> float32 [3, S, S], the vision tower's input.
  virtual torch::Tensor normalize(const cv::Mat& crop) const = 0;

  // ---- visual tokens --------------------------------------------------------------------------
  // The most visual tokens one image brings to the decoder before any reduction.
  virtual int64_t max_visual_tokens() const = 0;
  // One image's tokens for the decoder, reduced by `reducer` (the entry `method`, asked for by
  // `request`), in sequence order. Throws era::Error(kInvalidArgument) for a request the family
  // cannot serve (e.g. a per-crop method with an image-wide budget).
  virtual ReducedTokens reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                     const ReductionRequest& request) const = 0;

  // ---- video (families that take none keep these defaults, which refuse) -------------------------
  // Whether the bundle takes video (manifest "video" section).
  virtual bool takes_video() const { return false; }
  // One decoded RGB frame (CV_8UC3) -> the uint8 RGB frame the vision tower sees.
  virtual cv::Mat video_frame(const cv::Mat& rgb) const { (void)rgb; throw no_video(); }
  // A frame as video_frame gives it -> float32 [3, S, S].
  virtual torch::Tensor normalize_frame(const cv::Mat& frame) const { (void)frame; throw no_video(); }
  // The visual tokens one frame brings before any reduction (after the family's pooling).
  virtual int64_t tokens_per_frame() const { throw no_video(); }
  // The most visual tokens a video of `frames` frames brings before any reduction.
  virtual int64_t max_video_tokens(int64_t frames) const { (void)frames; throw no_video(); }
  // One video's tokens (its frames: `video.first`, `video.count` of the vision pass) for the
  // decoder, reduced by `reducer`, in sequence order; `kept` indexes the pooled frame tokens
  // (frame * tokens_per_frame() + index), -1 for tokens that stand for none (a newline).
  virtual ReducedTokens reduce_video(const ImageTokens& video, const MethodSpec& method, const Reducer& reducer,
                                     const ReductionRequest& request) const {
    (void)video, (void)method, (void)reducer, (void)request;
    throw no_video();
  }

  // ---- native resolution (Qwen2.5-VL; the others keep these defaults) --------------------------
  // Whether the tower takes each image and video at its own size, as flat patches with a (t, h, w)
  // grid (native_image / native_video), instead of fixed-size crops (crops / normalize).
  virtual bool native_resolution() const { return false; }
  // One decoded RGB image -> its patches and grid within `range`; `what` names it in errors.
  virtual NativeItem native_image(const cv::Mat& rgb, const PixelRange& range, const std::string& what) const {
    (void)rgb, (void)range, (void)what;
    throw Error(ErrorCode::kRuntime, arch() + " takes fixed-size crops, not native-resolution images");
  }
  // A video's decoded RGB frames -> its patches and grid within `range`.
  virtual NativeItem native_video(const std::vector<cv::Mat>& frames, const PixelRange& range, const std::string& what) const {
    (void)frames, (void)range, (void)what;
    throw no_video();
  }
  // The visual tokens an item of `grid` brings before any reduction.
  virtual int64_t native_tokens(const GridThw& grid) const { return grid.patches(); }

  // ---- decoder ---------------------------------------------------------------------------------
  // RoPE position ids [1, L] of a spliced prompt sequence.
  virtual torch::Tensor position_ids(const PromptSequence& sequence) const = 0;

 protected:
  // `base` for one request: `system` replaces its system text when set; a family without video
  // refuses videos and leaves "<video>" as plain text (no placeholder).
  PromptTemplate request_template(const PromptTemplate& base, const std::optional<std::string>& system, int num_videos) const {
    PromptTemplate tmpl = base;
    if (system) tmpl.system = *system;
    if (!takes_video()) {
      if (num_videos > 0) throw no_video();
      tmpl.video_placeholder.clear();
    }
    return tmpl;
  }
  Error no_video() const {
    return Error(ErrorCode::kPrompt, "this model (arch " + arch() + ") takes no video: its bundle has no \"video\" section");
  }
};

// The family of `bundle` by its manifest's `arch`; throws era::Error(kBundle) naming the bundle,
// the arch and the families this build knows, or a manifest field the family cannot use.
std::unique_ptr<ModelFamily> make_model_family(const ModelBundle& bundle);

// The `arch` names this build serves, in registry order.
std::vector<std::string> known_architectures();

}  // namespace era
