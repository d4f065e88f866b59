#pragma once
// The model-family seam: everything that differs between model families (LLaVA-1.5, LLaVA-NeXT,
// LLaVA-OneVision, Qwen2.5-VL) sits behind four small interfaces, one per pipeline stage that
// needs a family's knowledge, chosen from the bundle manifest's `arch`:
//   - PromptFormat: the conversation template, where placeholders go, prompt -> token ids;
//   - VisualProcessor: one decoded image, or a video's frames, -> what the vision tower takes
//     (fixed-size crops or native-resolution patches: the pipeline does not know which), the
//     frame sampling bounds of a video, and the batch of a prompt's items;
//   - TokenPacker: the visual tokens of one item for the decoder: how a method's budget is split,
//     how the vision output is handed to the method, how the tokens are packed;
//   - PositionScheme: the decoder's position ids for the spliced sequence.
// The pipeline (src/pipeline/) calls only these; each family lives in its own folder
// (family/<name>/) and is registered in family/registry.cpp.
// Adding a family: a folder with a class implementing ModelFamily, and one line in
// family/registry.cpp mapping its manifest `arch` to it (docs/architecture.md, "Adding a model family").
#include <torch/script.h>
#include <opencv2/core.hpp>

#include <array>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "era/era.h"
#include "era/methods.h"
#include "family/vision_cost.h"
#include "family/visual_item.h"
#include "model/bundle.h"
#include "model/vision_encoder.h"
#include "reduce/reducer.h"
#include "reduce/registry.h"
#include "runtime/sequence.h"
#include "text/tokenizer.h"
#include "video/video_io.h"

namespace era {

// One item's share of a vision pass: its views [first, first + count) of `vision` (crops or
// frames) and, in the pass's one row of tokens (native-resolution towers), from `first_token` on.
struct ImageTokens {
  const VisionOutput* vision = nullptr;
  MediaKind media = MediaKind::kImage;
  int64_t first = 0, count = 1;
  std::array<int64_t, 2> size{};  // (height, width) of the decoded image or frames
  // [M, D] the instruction's text embeddings, for methods that rank against it (else undefined).
  torch::Tensor instruction;
  GridThw grid;  // the item's (t, h, w) grid in patches (native-resolution families)
  int64_t first_token = 0;
  int64_t time_step = 1;  // the M-RoPE time step between its temporal patches
};

class PromptFormat {
 public:
  virtual ~PromptFormat() = default;
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
};

class VisualProcessor {
 public:
  virtual ~VisualProcessor() = default;
  // One decoded RGB image (CV_8UC3) of a prompt -> what the tower takes.
  virtual VisualItem image(const cv::Mat& rgb, const ItemContext& context) const = 0;
  // Whether the bundle takes video (manifest "video" section); the video members below refuse
  // (kPrompt) where it does not.
  virtual bool takes_video() const { return false; }
  // The bounds of a video file's frame sampling (`frames` asked for, or `fps` per second).
  virtual FrameSampling video_sampling(int frames, double fps) const;
  // A video's decoded RGB frames, sampled at `sampled_fps` (0: unknown) -> what the tower takes.
  virtual VisualItem video(const std::vector<cv::Mat>& frames, double sampled_fps, const ItemContext& context) const;
  // The most visual tokens a video of `frames` frames brings before any reduction (a lower bound
  // where the frames' size decides it).
  virtual int64_t max_video_tokens(int64_t frames) const;
  // A prompt's items' pixels, in order, as one vision pass's input.
  virtual VisionBatch batch(const std::vector<VisualItem>& items) const = 0;

  // The error of a video asked of a family or bundle that takes none.
  virtual Error no_video() const = 0;
};

class TokenPacker {
 public:
  virtual ~TokenPacker() = default;
  // The most visual tokens one image brings to the decoder before any reduction.
  virtual int64_t max_visual_tokens() const = 0;
  // The visual tokens `item` (its media, view count and grid set) brings before any reduction.
  virtual int64_t item_tokens(const ImageTokens& item) const = 0;
  // One item's tokens for the decoder, reduced by `reducer` (the entry `method`, asked for by
  // `request`), in sequence order; a video's `kept` indexes its frames' tokens, -1 for tokens
  // that stand for none (a newline). Throws era::Error(kInvalidArgument) for a request the
  // family cannot serve (e.g. a per-crop method with an image-wide budget).
  virtual ReducedTokens reduce(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                               const ReductionRequest& request) const = 0;
};

class PositionScheme {
 public:
  virtual ~PositionScheme() = default;
  // RoPE position ids [1, L] (or [3, 1, L] for multimodal RoPE) of a spliced prompt sequence.
  virtual torch::Tensor position_ids(const PromptSequence& sequence) const = 0;
};

// A family: its name and its four parts.
class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  // The manifest `arch` this family serves ("llava-1.5").
  virtual std::string arch() const = 0;
  virtual const PromptFormat& prompt() const = 0;
  virtual const VisualProcessor& processor() const = 0;
  virtual const TokenPacker& packer() const = 0;
  virtual const PositionScheme& positions() const = 0;
};

// The error of a video asked of a model whose family or bundle takes none (`arch` names it; `video`,
// when given, names the video).
Error no_video_error(const std::string& arch, const std::string& video = "");

// `base` for one request: `system` replaces its system text when set; a family without video
// (`takes_video` false) refuses videos (`no_video`) and leaves "<video>" as plain text.
PromptTemplate request_template(const PromptTemplate& base, const std::optional<std::string>& system, int num_videos,
                                bool takes_video, const Error& no_video);

using FamilyFactory = std::function<std::unique_ptr<ModelFamily>(const ModelBundle&)>;
// A family's reading of its own manifest sections: throws era::Error(kBundle) naming the field.
using SectionChecks = std::function<void(const Manifest&)>;

// Adds a family to this process's registry beside the built-in ones (a family kept outside this
// library, or a test's stub): bundles whose manifest names `arch` then open with it. Throws
// era::Error(kInvalidArgument) if `arch` is taken. `check_modules` may be empty (no checks of the
// vision tower and projector beyond the common ones), and `cost` (era_bench's FLOP formulas,
// family/vision_cost.h; without, era_bench refuses the bundle), and `check_sections` (the
// family's own manifest sections, read at load before the modules; without, none are read then).
void register_model_family(const std::string& arch, FamilyFactory make, ModuleChecks check_modules,
                           std::function<VisionCost(const Manifest&)> cost = {}, SectionChecks check_sections = {});

// The family of `bundle` by its manifest's `arch`; throws era::Error(kBundle) naming the bundle,
// the arch and the families this build knows, or a manifest field the family cannot use.
std::unique_ptr<ModelFamily> make_model_family(const ModelBundle& bundle);

// The module checks of `bundle`'s family (load_bundle's FamilyChecks::modules): its vision tower and
// projector; throws era::Error(kBundle) as make_model_family does for an unknown arch, or naming
// the file and the mismatch.
void check_family_modules(const ModelBundle& bundle);

// The family's reading of `manifest`'s own sections alone (load_bundle's FamilyChecks::sections,
// before any module is opened); throws era::Error(kBundle) for an unknown arch or naming the field.
void check_family_sections(const Manifest& manifest);

// The family's vision tower and projector as era's own models over a Hugging Face folder's weights
// (load_bundle's FamilyChecks::native_vision; family/llava_native_vision.h); nullptr where the
// family has none (its tower then stays the bundle's TorchScript module).
std::shared_ptr<VisionBackend> load_family_native_vision(const std::string& hf_dir, const Manifest& manifest,
                                                         const torch::Device& device, torch::ScalarType dtype);

// The manifest document of the Hugging Face folder `dir` (config.json's model_type picks the
// family; load_bundle's FamilyChecks::hf_manifest). Throws era::Error(kBundle) naming config.json
// and the field: an unknown model_type, one era reads from bundles only so far, or any setting the
// family refuses.
nlohmann::json manifest_from_hf_folder(const std::string& dir);

// The `arch` names this build serves, in registry order.
std::vector<std::string> known_architectures();

}  // namespace era
