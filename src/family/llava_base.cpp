#include "family/llava_base.h"

#include "era/error.h"
#include "model/module_checks.h"
#include "text/prompt.h"

namespace era {

ClipImageConfig clip_config(const LlavaImageSpec& image) {
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

void check_llava_modules(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& v = m.vision;
  const LlavaSections sections = read_llava_sections(m);  // refuses sections this family cannot read
  // A CLIP / SigLIP tower: patch and position embeddings, the layers_run layers the features need
  // (the exporter keeps those; the rest never run).
  ShapeChecker vision(b.vision, b.dir, m.vision_file);
  vision.expect("embeddings.patch_embedding.weight", {v.hidden_size, 3, v.patch_size, v.patch_size});
  vision.expect("embeddings.position_embedding.weight", {v.num_patches + (v.has_cls ? 1 : 0), v.hidden_size});
  const int64_t vision_mlp = v.intermediate_size > 0 ? v.intermediate_size : -1;
  for (int64_t i = 0; i < v.layers_run; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"})
      vision.expect(p + "self_attn." + proj + ".weight", {v.hidden_size, v.hidden_size});
    vision.expect(p + "mlp.fc1.weight", {vision_mlp, v.hidden_size});
    vision.expect(p + "mlp.fc2.weight", {v.hidden_size, vision_mlp});
  }
  if (vision.has("encoder.layers." + std::to_string(v.layers_run) + ".self_attn.q_proj.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.vision_file + " has more than the manifest's " +
                                        std::to_string(v.layers_run) + " vision layers (vision.layers_run)");
  }
  // LLaVA's projector goes to the decoder's width first (C -> D -> D); anyres adds the row newline.
  ShapeChecker proj(b.projector, b.dir, m.projector_file);
  proj.expect("linear_1.weight", {m.projector_out, m.projector_in});
  proj.expect("linear_2.weight", {m.projector_out, m.projector_out});
  if (sections.image.layout == ImageLayout::kAnyres) proj.expect("image_newline", {m.projector_out});

  // The values baked into the tower, which the shapes cannot tell apart.
  AttributeChecker attrs(b.vision, b.dir, m.vision_file);
  for (int64_t i = 0; i < v.layers_run; ++i)
    attrs.expect("encoder.layers." + std::to_string(i) + ".self_attn", "num_heads", "vision.num_heads", v.num_heads);
  attrs.expect("encoder", "num_layers", "vision.layers_run", v.layers_run);
  // HF hidden_states indices, made non-negative as the exporter does (num_layers + 1 + k)
  std::vector<int64_t> indices;
  for (const int64_t k : v.feature_layers) indices.push_back(k < 0 ? v.num_layers + 1 + k : k);
  attrs.expect("encoder", "feature_indices", "vision.feature_layers " + shown(v.feature_layers) + " as hidden_states indices",
               indices);
  attrs.expect("", "first_token", "vision.select_strategy \"" + v.select_strategy + "\" as the first feature token",
               int64_t{v.select_strategy == "full" ? 0 : 1});
}

VisionCost llava_vision_cost(const Manifest& manifest) {
  const auto& v = manifest.vision;
  const double C = static_cast<double>(v.hidden_size), P = static_cast<double>(v.patch_size), D = manifest.text.hidden_size,
               I = static_cast<double>(v.mlp_width());
  const double patches = static_cast<double>(v.num_patches), N = patches + 1;  // + CLS
  const double patch_embed = 2.0 * patches * (3 * P * P) * C;
  const double per_layer = 2.0 * N * (4 * C * C + 2 * C * I) + 4.0 * N * N * C;
  const double vision = patch_embed + static_cast<double>(v.layers_run) * per_layer;
  const double projector = 2.0 * patches * (C * D + D * D);
  return {[vision](int64_t crops, const ItemGrids&) { return static_cast<double>(crops) * vision; },
          [projector](int64_t crops, const ItemGrids&) { return static_cast<double>(crops) * projector; }};
}

LlavaFamilyBase::LlavaFamilyBase(const ModelBundle& bundle)
    : manifest_(bundle.manifest),
      bundle_dir_(bundle.dir),
      sections_(read_llava_sections(bundle.manifest)),
      clip_(clip_config(sections_.image)) {}

void LlavaFamilyBase::require_layout(std::initializer_list<ImageLayout> allowed) const {
  for (const ImageLayout layout : allowed)
    if (sections_.image.layout == layout) return;
  throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.aspect_ratio '" + sections_.image.aspect_ratio +
                                      "' does not fit architecture " + manifest_.arch);
}

std::string LlavaFamilyBase::format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images,
                                           int num_videos, const std::optional<std::string>& system) const {
  return era::format_conversation(request_template(manifest_.prompt, system, num_videos, takes_video(), no_video()), history,
                                  question, num_images, num_videos);
}

std::vector<int64_t> LlavaFamilyBase::tokenize(const Tokenizer& tokenizer, const std::string& prompt) const {
  // BOS / EOS written as text are single ids, as HF's tokenizers treat special tokens in text:
  // the turn separators of a conversation ("</s>", "<s>") depend on it.
  std::vector<AddedToken> specials = manifest_.tokens.added_tokens;
  specials.push_back({tokenizer.piece(tokenizer.bos_id()), tokenizer.bos_id()});
  specials.push_back({tokenizer.piece(tokenizer.eos_id()), tokenizer.eos_id()});
  return tokenize_with_images(tokenizer, prompt, manifest_.prompt.image_placeholder, manifest_.tokens.image_token_id, specials);
}

torch::Tensor LlavaFamilyBase::normalize(const cv::Mat& crop) const { return normalize_to_chw(crop, clip_); }

Error LlavaFamilyBase::no_video() const { return no_video_error(arch()); }

namespace {

VisualItem stacked(std::vector<cv::Mat> views, const std::vector<torch::Tensor>& normalized) {
  VisualItem item;
  item.pixels = torch::stack(normalized);
  item.views = std::move(views);
  return item;
}

}  // namespace

VisualItem LlavaFamilyBase::image(const cv::Mat& rgb, const ItemContext& context) const {
  std::vector<cv::Mat> cut = crops_in_prompt(rgb, context.images_in_prompt);
  std::vector<torch::Tensor> normalized;
  for (const cv::Mat& crop : cut) normalized.push_back(normalize(crop));
  return stacked(std::move(cut), normalized);
}

VisualItem LlavaFamilyBase::video(const std::vector<cv::Mat>& frames, double, const ItemContext&) const {
  if (!takes_video()) throw no_video();
  std::vector<cv::Mat> views;
  std::vector<torch::Tensor> normalized;
  for (const cv::Mat& rgb : frames) {
    views.push_back(video_frame(rgb));
    normalized.push_back(normalize_frame(views.back()));
  }
  return stacked(std::move(views), normalized);
}

VisionBatch LlavaFamilyBase::batch(const std::vector<VisualItem>& items) const {
  VisionBatch b;
  std::vector<torch::Tensor> pixels;
  for (const VisualItem& item : items) pixels.push_back(item.pixels);
  const int64_t s = sections_.image.size;
  b.pixel_values = pixels.empty() ? torch::empty({0, 3, s, s}) : torch::cat(pixels, 0);
  return b;
}

int64_t LlavaFamilyBase::item_tokens(const ImageTokens& item) const {
  return item.count * (item.media == MediaKind::kVideo ? tokens_per_frame() : tokens_per_crop());
}

ReducedTokens LlavaFamilyBase::reduce(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                                      const ReductionRequest& request) const {
  if (item.media == MediaKind::kVideo) return reduce_video(item, method, reducer, request);
  return reduce_image(item, method, reducer, request);
}

cv::Mat LlavaFamilyBase::video_frame(const cv::Mat&) const { throw no_video(); }
torch::Tensor LlavaFamilyBase::normalize_frame(const cv::Mat&) const { throw no_video(); }
int64_t LlavaFamilyBase::tokens_per_frame() const { throw no_video(); }
ReducedTokens LlavaFamilyBase::reduce_video(const ImageTokens&, const MethodSpec&, const Reducer&,
                                            const ReductionRequest&) const {
  throw no_video();
}

torch::Tensor LlavaFamilyBase::position_ids(const PromptSequence& sequence) const {
  return torch::arange(sequence.length(), torch::kLong).unsqueeze(0);  // LLaMA RoPE: 0..L-1
}

}  // namespace era
