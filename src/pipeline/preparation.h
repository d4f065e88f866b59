#pragma once
// Internal header. Stage 1: a request's prompt and images as model inputs (template, token ids,
// decoded images cut into crops by the model family, normalised pixels).
#include <torch/script.h>

#include "era/era.h"
#include "pipeline/session_internals.h"

namespace era {

struct PreparedRequest {
  PreparedInput input;  // the public part (prompt, ids, crops as images)
  VisionBatch pixels;   // every item's pixels as one vision pass (the family's processor made it)
  // Per item, in prompt order: its media, views (crops or frames), grid and time step, as the
  // family's token packer reads them (ImageTokens without the vision pass).
  std::vector<ImageTokens> items;
  bool has_pixels() const { return !pixels.empty(); }
};

// Throws kPrompt (placeholders do not match the images, the text alone does not fit) and kImage.
PreparedRequest prepare_request(const SessionState& impl, const Request& request);

// Throws kPrompt unless text + visual tokens leave room for at least one answer token; `hint`
// (what to change, e.g. a video's frame count) ends the message.
void check_fits(int64_t text_tokens, int64_t visual_tokens, const TextSpec& text, const std::string& hint = "");

// What to change when a request's videos make its prompt too long ("" without videos).
std::string video_length_hint(const Request& request);

}  // namespace era
