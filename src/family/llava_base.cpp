#include "family/llava_base.h"

#include "era/error.h"
#include "text/prompt.h"

namespace era {

ClipImageConfig clip_config(const ImageSpec& image) {
  ClipImageConfig clip;
  clip.size = static_cast<int>(image.size);
  clip.shortest_edge = static_cast<int>(image.shortest_edge);
  clip.mode = image.layout == ImageLayout::kCrop ? AspectMode::kCrop : AspectMode::kPad;
  clip.filter = image.filter;
  clip.mean = image.mean;
  clip.std = image.std;
  clip.pad_color = image.pad_color;
  return clip;
}

LlavaFamilyBase::LlavaFamilyBase(const ModelBundle& bundle)
    : manifest_(bundle.manifest), bundle_dir_(bundle.dir), clip_(clip_config(bundle.manifest.image)) {}

void LlavaFamilyBase::require_layout(std::initializer_list<ImageLayout> allowed) const {
  for (const ImageLayout layout : allowed)
    if (manifest_.image.layout == layout) return;
  throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.aspect_ratio '" + manifest_.image.aspect_ratio +
                                      "' does not fit architecture " + manifest_.arch);
}

std::string LlavaFamilyBase::format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images, int num_videos,
                                           const std::optional<std::string>& system) const {
  return era::format_conversation(request_template(manifest_.prompt, system, num_videos), history, question, num_images, num_videos);
}

std::vector<int64_t> LlavaFamilyBase::tokenize(const Tokenizer& tokenizer, const std::string& prompt) const {
  // BOS / EOS written as text are single ids, as HF's tokenizers treat special tokens in text:
  // the turn separators of a conversation ("</s>", "<s>") depend on it.
  std::vector<AddedToken> specials = manifest_.tokens.added_tokens;
  specials.push_back({tokenizer.piece(tokenizer.bos_id()), tokenizer.bos_id()});
  specials.push_back({tokenizer.piece(tokenizer.eos_id()), tokenizer.eos_id()});
  return tokenize_with_images(tokenizer, prompt, manifest_.prompt.image_placeholder, manifest_.tokens.image_token_id,
                              specials);
}

torch::Tensor LlavaFamilyBase::normalize(const cv::Mat& crop) const { return normalize_to_chw(crop, clip_); }

torch::Tensor LlavaFamilyBase::position_ids(const PromptSequence& sequence) const {
  return torch::arange(sequence.length(), torch::kLong).unsqueeze(0);  // LLaMA RoPE: 0..L-1
}

}  // namespace era
