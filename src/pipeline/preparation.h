#pragma once
// Internal header. Stage 1: a request's prompt and images as model inputs (template, token ids,
// decoded images cut into crops by the model family, normalised pixels).
#include <torch/script.h>

#include "era/era.h"
#include "pipeline/session_internals.h"

namespace era {

struct PreparedRequest {
  PreparedInput input;         // the public part (prompt, ids, crops as images)
  // float32 [crops, 3, S, S]; native-resolution families: every item's patches, concatenated
  // [patches, 3 * temporal_patch * patch^2], with their grids in `grid_thw` [items, 3] int64
  torch::Tensor pixel_values;
  torch::Tensor grid_thw;
  std::vector<int64_t> time_steps;  // native: per item, the M-RoPE time step of its temporal patches
  bool has_pixels() const { return pixel_values.defined() && pixel_values.size(0) > 0; }
};

// Throws kPrompt (placeholders do not match the images, the text alone does not fit) and kImage.
PreparedRequest prepare_request(const SessionState& impl, const Request& request);

// Throws kPrompt unless text + visual tokens leave room for at least one answer token; `hint`
// (what to change, e.g. a video's frame count) ends the message.
void check_fits(int64_t text_tokens, int64_t visual_tokens, const TextSpec& text, const std::string& hint = "");

// Native-resolution video: the M-RoPE time step between temporal patches (transformers'
// tokens_per_second x int(temporal_patch_size / fps)); fps: the video's sampled fps, 0 = the bundle's.
int64_t native_time_step(const Manifest& manifest, double sampled_fps);

// What to change when a request's videos make its prompt too long ("" without videos).
std::string video_length_hint(const Request& request);

}  // namespace era
