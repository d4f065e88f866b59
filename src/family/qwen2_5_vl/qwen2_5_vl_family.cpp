#include "family/qwen2_5_vl/qwen2_5_vl_family.h"

#include <algorithm>

#include "era/error.h"
#include "family/anyres_reduction.h"
#include "family/qwen2_5_vl/mrope_positions.h"
#include "family/qwen2_5_vl/native_patches.h"
#include "family/vision_input.h"
#include "model/module_checks.h"
#include "reduce/budget.h"
#include "text/prompt.h"

namespace era {
namespace {

// The tokens [first, first + slices * n) of a native vision pass (one row) as `slices` crops of n
// tokens: the layout crop_input / joint_input / reduce_crops read. No CLS outputs (the tower has
// no CLS token).
VisionOutput item_view(const VisionOutput& all, int64_t first, int64_t slices, int64_t n) {
  const auto rows = [&](const torch::Tensor& x) { return x[0].slice(0, first, first + slices * n).reshape({slices, n, -1}); };
  const auto cols = [&](const torch::Tensor& x) {  // [1, H, N] -> [slices, H, n]
    return x[0].slice(1, first, first + slices * n).reshape({x.size(1), slices, n}).permute({1, 0, 2});
  };
  VisionOutput v;
  v.features = rows(all.features);
  v.embeddings = rows(all.embeddings);
  v.mean_logits = cols(all.mean_logits);
  v.mean_probs = cols(all.mean_probs);
  const int64_t heads = all.mean_logits.size(1);
  v.cls_logits = torch::zeros({slices, heads, 0}, all.mean_logits.options());
  v.cls_probs = v.cls_logits;
  v.project = all.project;
  return v;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

void check_qwen25vl_modules(const ModelBundle& b) {
  const auto& m = b.manifest;
  const auto& v = m.vision;
  const Qwen25VlSections s = read_qwen25vl_sections(m);
  // A native-resolution tower: Conv3d patch embedding, blocks with fused q/k/v and gated MLPs, the
  // merger's RMSNorm (its MLP is the projector).
  ShapeChecker vision(b.vision, b.dir, m.vision_file);
  vision.expect("patch_embed.proj.weight", {v.hidden_size, 3, s.temporal_patch_size, v.patch_size, v.patch_size});
  const int64_t mlp = v.intermediate_size > 0 ? v.intermediate_size : -1;  // older bundles: any width
  for (int64_t i = 0; i < v.num_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    vision.expect(p + "attn.qkv.weight", {3 * v.hidden_size, v.hidden_size});
    vision.expect(p + "attn.proj.weight", {v.hidden_size, v.hidden_size});
    vision.expect(p + "mlp.gate_proj.weight", {mlp, v.hidden_size});
    vision.expect(p + "mlp.down_proj.weight", {v.hidden_size, mlp});
  }
  if (vision.has("blocks." + std::to_string(v.num_layers) + ".attn.qkv.weight")) {
    throw Error(ErrorCode::kBundle, "bundle " + b.dir + ": " + m.vision_file + " has more than the manifest's " +
                                        std::to_string(v.num_layers) + " vision blocks (vision.num_layers)");
  }
  // The merger MLP keeps its input width inside (4C -> 4C -> D).
  ShapeChecker proj(b.projector, b.dir, m.projector_file);
  proj.expect("linear_1.weight", {m.projector_in, m.projector_in});
  proj.expect("linear_2.weight", {m.projector_out, m.projector_in});

  AttributeChecker attrs(b.vision, b.dir, m.vision_file);
  attrs.expect("", "num_heads", "vision.num_heads", v.num_heads);
  for (int64_t i = 0; i < v.num_layers; ++i)
    attrs.expect("blocks." + std::to_string(i) + ".attn", "num_heads", "vision.num_heads", v.num_heads);
  attrs.expect("", "merge", "vision.spatial_merge_size", s.spatial_merge_size);
  // the exporter's window in merged-token units: window_size // spatial_merge_size // patch_size
  if (s.window_size > 0) {
    attrs.expect("", "window_units", "vision.window_size " + std::to_string(s.window_size) + " / spatial_merge_size / patch_size",
                 s.window_size / s.spatial_merge_size / v.patch_size);
  }
  if (s.fullatt_block_indexes)
    attrs.expect_true_at("", "full_attention", "vision.fullatt_block_indexes", *s.fullatt_block_indexes);
}

VisionCost qwen25vl_vision_cost(const Manifest& manifest) {
  return qwen25vl_tower_cost(manifest, read_qwen25vl_sections(manifest));
}

VisionCost qwen25vl_tower_cost(const Manifest& manifest, const Qwen25VlSections& s) {
  const auto& v = manifest.vision;
  const double C = static_cast<double>(v.hidden_size), P = static_cast<double>(v.patch_size), D = manifest.text.hidden_size,
               I = static_cast<double>(v.mlp_width());
  const int64_t merge = std::max<int64_t>(1, s.spatial_merge_size), layers = v.num_layers;
  const int64_t units = std::max<int64_t>(1, s.window_size / (merge * v.patch_size));  // the window, in merge units a side
  const int64_t full =
      std::min<int64_t>(s.fullatt_block_indexes ? static_cast<int64_t>(s.fullatt_block_indexes->size()) : 0, layers);
  const double temporal = static_cast<double>(s.temporal_patch_size);
  const auto vision = [=](int64_t, const ItemGrids& grids) {
    double patches = 0, window_sq = 0, slice_sq = 0;  // sums of segment sizes squared
    const auto span = [](int64_t n, int64_t size, int64_t i) { return std::min(size, n - i * size); };
    for (const auto& [t, h, w] : grids) {
      patches += static_cast<double>(t * h * w);
      slice_sq += static_cast<double>(t) * static_cast<double>(h * w) * static_cast<double>(h * w);
      const int64_t lh = h / merge, lw = w / merge;
      for (int64_t r = 0; r * units < lh; ++r)
        for (int64_t c = 0; c * units < lw; ++c) {
          const double s = static_cast<double>(span(lh, units, r) * span(lw, units, c) * merge * merge);
          window_sq += static_cast<double>(t) * s * s;
        }
    }
    const double dense = 2.0 * patches * (4 * C * C + 3 * C * I);
    return 2.0 * patches * (3 * temporal * P * P) * C + static_cast<double>(layers) * dense +
           4.0 * C * (static_cast<double>(full) * slice_sq + static_cast<double>(layers - full) * window_sq);
  };
  const auto projector = [=](int64_t, const ItemGrids& grids) {
    double tokens = 0;
    for (const auto& [t, h, w] : grids) tokens += static_cast<double>(t * (h / merge) * (w / merge));
    const double in = C * static_cast<double>(merge * merge);
    return 2.0 * tokens * (in * in + in * D);
  };
  return {vision, projector};
}

// The sections refuse a manifest this family cannot serve (read_qwen25vl_sections).
Qwen25VlFamily::Qwen25VlFamily(const ModelBundle& bundle)
    : manifest_(bundle.manifest), bundle_dir_(bundle.dir), sections_(read_qwen25vl_sections(bundle.manifest)) {}

std::string Qwen25VlFamily::format_prompt(const std::vector<Turn>& history, const std::string& question, int num_images,
                                          int num_videos, const std::optional<std::string>& system) const {
  const PromptTemplate tmpl = request_template(manifest_.prompt, system, num_videos, takes_video(), no_video());
  // Placeholders the user wrote stay where they are; those the template puts in front come as
  // "<image>\n", where Qwen's chat template writes the vision block with no newline after it.
  int written = count_placeholders(question, tmpl.image_placeholder);
  for (const Turn& turn : history) written += count_placeholders(turn.user, tmpl.image_placeholder);
  if (!tmpl.video_placeholder.empty()) {
    written += count_placeholders(question, tmpl.video_placeholder);
    for (const Turn& turn : history) written += count_placeholders(turn.user, tmpl.video_placeholder);
  }
  std::string prompt = era::format_conversation(tmpl, history, question, num_images, num_videos);
  const std::string image_block = vision_start_ + image_pad_ + vision_end_;
  const std::string video_block = vision_start_ + video_pad_ + vision_end_;
  if (written == 0) {
    replace_all(prompt, tmpl.image_placeholder + "\n", image_block);
    if (!tmpl.video_placeholder.empty()) replace_all(prompt, tmpl.video_placeholder + "\n", video_block);
  }
  replace_all(prompt, tmpl.image_placeholder, image_block);
  if (!tmpl.video_placeholder.empty()) replace_all(prompt, tmpl.video_placeholder, video_block);
  return prompt;
}

// Qwen2's BPE with no BOS; the pad tokens, vision markers and ChatML markers are added tokens.
std::vector<int64_t> Qwen25VlFamily::tokenize(const Tokenizer& tokenizer, const std::string& prompt) const {
  std::vector<AddedToken> specials = manifest_.tokens.added_tokens;
  if (takes_video()) specials.push_back({video_pad_, manifest_.tokens.video_token_id});
  return tokenize_with_images(tokenizer, prompt, image_pad_, manifest_.tokens.image_token_id, specials);
}

Error Qwen25VlFamily::no_video() const { return no_video_error(arch()); }

// The most an image can bring at the bundle's max_pixels (a request may ask for more).
int64_t Qwen25VlFamily::max_visual_tokens() const {
  const auto& n = sections_.image.native;
  return n.max_pixels / (n.factor() * n.factor());
}

// A lower bound (frames are sized only once decoded): the early too-long check never refuses a
// video that would fit; the check after the vision pass has the real count.
int64_t Qwen25VlFamily::max_video_tokens(int64_t frames) const {
  if (!takes_video()) throw no_video();
  const auto& n = sections_.video->native;
  const int64_t temporal = (frames + n.temporal_patch_size - 1) / n.temporal_patch_size;
  return temporal * std::max<int64_t>(1, n.min_pixels / (n.factor() * n.factor()));
}

namespace {

// The bundle's pixel range with the request's overrides. One override can cross the bundle's other
// bound (min_pixels alone above its max_pixels): refused naming both and where each came from, as
// smart_resize would silently honour max_pixels alone.
NativeResolution qwen_pixel_range(NativeResolution spec, const ItemContext& range, const std::string& section) {
  if (range.min_pixels > 0) spec.min_pixels = range.min_pixels;
  if (range.max_pixels > 0) spec.max_pixels = range.max_pixels;
  if (spec.min_pixels > spec.max_pixels) {
    const auto source = [&](int64_t given, const char* field) {
      return given > 0 ? std::string("the request's ") + field : "the bundle's " + section + "." + field;
    };
    throw Error(ErrorCode::kInvalidArgument, "min_pixels " + std::to_string(spec.min_pixels) + " (" +
                                                 source(range.min_pixels, "min_pixels") + ") is above max_pixels " +
                                                 std::to_string(spec.max_pixels) + " (" + source(range.max_pixels, "max_pixels") +
                                                 ")");
  }
  return spec;
}

}  // namespace

namespace {

VisualItem item_of(NativeItem native, int64_t time_step) {
  VisualItem item;
  item.pixels = std::move(native.patches);
  item.views = std::move(native.frames);
  item.grid = native.grid;
  item.time_step = time_step;
  return item;
}

}  // namespace

VisualItem Qwen25VlFamily::image(const cv::Mat& rgb, const ItemContext& context) const {
  const NativeMediaSpec& image = sections_.image;
  const NativeResolution spec = qwen_pixel_range(image.native, context, "image");
  return item_of(native_patches({rgb}, spec, image.filter, image.mean, image.std, context.name), 1);
}

FrameSampling Qwen25VlFamily::video_sampling(int frames, double fps) const {
  FrameSampling sampling = VisualProcessor::video_sampling(frames, fps);
  sampling.multiple = sections_.video->native.temporal_patch_size;
  sampling.min_frames = sections_.video->min_frames;
  sampling.max_frames = sections_.video->max_frames;
  return sampling;
}

int64_t Qwen25VlFamily::time_step(double sampled_fps) const {
  // tokens_per_second x int(second_per_grid_t), with second_per_grid_t = temporal_patch_size / fps
  // (the int() truncates, as there)
  const double fps = sampled_fps > 0 ? sampled_fps : sections_.video->fps;
  const double seconds = static_cast<double>(sections_.video->native.temporal_patch_size) / fps;
  return sections_.tokens_per_second * static_cast<int64_t>(seconds);
}

VisualItem Qwen25VlFamily::video(const std::vector<cv::Mat>& frames, double sampled_fps, const ItemContext& context) const {
  if (!takes_video()) throw no_video();
  const NativeVideoSpec& video = *sections_.video;
  const NativeResolution spec = qwen_pixel_range(video.native, context, "video");
  return item_of(native_patches(frames, spec, video.filter, video.mean, video.std, context.name), time_step(sampled_fps));
}

VisionBatch Qwen25VlFamily::batch(const std::vector<VisualItem>& items) const {
  VisionBatch b;
  const auto& n = sections_.image.native;
  std::vector<torch::Tensor> pixels;
  b.grid_thw = torch::empty({static_cast<int64_t>(items.size()), 3}, torch::kLong);
  for (size_t i = 0; i < items.size(); ++i) {
    pixels.push_back(items[i].pixels);
    const GridThw g = items[i].grid.value_or(GridThw{});
    const int64_t row = static_cast<int64_t>(i);
    b.grid_thw[row][0] = g.t;
    b.grid_thw[row][1] = g.h;
    b.grid_thw[row][2] = g.w;
  }
  b.pixel_values =
      pixels.empty() ? torch::empty({0, 3 * n.temporal_patch_size * n.patch_size * n.patch_size}) : torch::cat(pixels, 0);
  return b;
}

int64_t Qwen25VlFamily::item_tokens(const ImageTokens& item) const {
  const int64_t m = sections_.spatial_merge_size;
  return item.grid.t * (item.grid.h / m) * (item.grid.w / m);
}

ReducedTokens Qwen25VlFamily::reduce_item(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                                          const ReductionRequest& request) const {
  const int64_t m = sections_.spatial_merge_size;
  const int64_t slices = item.grid.t, n = (item.grid.h / m) * (item.grid.w / m);
  const VisionOutput view = item_view(*item.vision, item.first_token, slices, n);
  ReducedTokens out;
  if (method.name == unreduced_method().name) {
    out = FullReducer().reduce(joint_input(view, 0, slices, 0));
  } else if (slices == 1) {  // an image (or a one-patch video): one selection with the item's budget
    ReductionInput in = crop_input(view, 0, resolve_budget(request, n, request.tokens));
    in.instruction_embeddings = item.instruction;
    out = reducer.reduce(in);
  } else if (method.capabilities.selects_packed_sequence) {  // DivPrune: over the whole video
    ReductionInput in = joint_input(view, 0, slices, resolve_budget(request, slices * n, request.tokens));
    in.instruction_embeddings = item.instruction;
    out = reducer.reduce(in);
  } else {  // the video's budget spread over its temporal patches (at least 1 each), or one global selection
    ImageTokens frames = item;
    frames.vision = &view;
    frames.first = 0;
    frames.count = slices;
    const int64_t per_slice = request.tokens > 0 ? std::max<int64_t>(1, request.tokens / slices) : 0;
    out = reduce_crops(frames, method, reducer, request, n, per_slice);
  }
  out.token_grid = {slices, item.grid.h / m, item.grid.w / m};
  out.time_step = item.time_step;
  return out;
}

ReducedTokens Qwen25VlFamily::reduce(const ImageTokens& item, const MethodSpec& method, const Reducer& reducer,
                                     const ReductionRequest& request) const {
  if (item.media == MediaKind::kVideo && !takes_video()) throw no_video();
  return reduce_item(item, method, reducer, request);
}

torch::Tensor Qwen25VlFamily::position_ids(const PromptSequence& sequence) const { return mrope_positions(sequence); }

}  // namespace era
