#include "pipeline/preparation.h"

#include "era/error.h"
#include "text/prompt.h"

namespace era {
namespace {

// An Image of a request as the contiguous RGB matrix load_rgb_image gives for a file, so every
// source goes through the same preprocessing.
cv::Mat rgb_of(const Image& image, const ImageLimits& limits) {
  switch (image.source()) {
    case Image::Source::kFile:
      return load_rgb_image(image.name(), limits);
    case Image::Source::kEncoded:
      return decode_rgb_image(image.data(), image.size_bytes(), image.name(), limits);
    case Image::Source::kPixels:
      return rgb_from_buffer(image.data(), image.width(), image.height(), 3, image.width() * 3, limits);
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown image source");
}

}  // namespace

void check_fits(int64_t text_tokens, int64_t visual_tokens, const TextSpec& text) {
  const int64_t context = text.context_limit();
  if (text_tokens + visual_tokens < context) return;
  // A sliding-window model is limited to its window: era does not implement the window, and
  // within it full attention is the same computation.
  const std::string why = context < text.max_position_embeddings
                              ? " (its sliding attention window, manifest text.sliding_window; era attends to the "
                                "whole sequence, which is exact only within the window)"
                              : "";
  throw Error(ErrorCode::kPrompt, "prompt too long: " + std::to_string(text_tokens) + " text tokens + " +
                                      std::to_string(visual_tokens) + " image tokens = " +
                                      std::to_string(text_tokens + visual_tokens) + ", but the model's context is " +
                                      std::to_string(context) + " tokens" + why + " (one must be left to answer)");
}

PreparedRequest prepare_request(const SessionState& impl, const Request& request) {
  const ModelFamily& family = *impl.family;
  PreparedRequest out;
  PreparedInput& in = out.input;
  const int n_images = static_cast<int>(request.images.size() + request.image_buffers.size());
  if (request.use_template) {
    in.prompt = family.format_prompt(request.history, request.prompt, n_images, request.system);
  } else {
    in.prompt = request.prompt;
    const std::string& placeholder = family.image_placeholder();
    const int found = count_placeholders(in.prompt, placeholder);
    if (found != n_images) {
      throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + placeholder +
                                          " placeholder(s) but " + std::to_string(n_images) + " image(s) were given");
    }
  }
  in.image_token_id = impl.bundle.manifest.tokens.image_token_id;
  in.token_ids = family.tokenize(*impl.bundle.tokenizer, in.prompt);

  // Fail before any image work when the text alone cannot fit; the full check, with the real
  // number of (reduced) visual tokens, runs once the sequence is built.
  const int64_t text_tokens = static_cast<int64_t>(in.token_ids.size()) - n_images;
  check_fits(text_tokens, 0, impl.bundle.manifest.text);

  std::vector<torch::Tensor> pixels;
  std::vector<Image> images;
  for (const auto& path : request.images) images.push_back(Image::from_file(path));
  images.insert(images.end(), request.image_buffers.begin(), request.image_buffers.end());
  for (const auto& image : images) {
    const cv::Mat rgb = rgb_of(image, impl.image_limits);
    in.image_sizes.push_back({rgb.rows, rgb.cols});
    const std::vector<cv::Mat> crops = family.crops_in_prompt(rgb, static_cast<int>(images.size()));
    for (const cv::Mat& crop : crops) {
      pixels.push_back(family.normalize(crop));
      in.crops.push_back(Image::from_pixels(crop.data, crop.cols, crop.rows, static_cast<int>(crop.step), PixelFormat::kRGB8));
    }
    in.crops_per_image.push_back(static_cast<int64_t>(crops.size()));
  }
  const int64_t s = impl.bundle.manifest.image.size;
  out.pixel_values = pixels.empty() ? torch::empty({0, 3, s, s}) : torch::stack(pixels);
  return out;
}

}  // namespace era
