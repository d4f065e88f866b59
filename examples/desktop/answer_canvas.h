#pragma once
// The window's picture: the image (with the reduction drawn over it once known) on the left,
// the question and the answer streaming in on the right, a status line at the bottom. One
// cv::Mat is both shown with imshow and written by --screenshot, so the PNG is the window.
#include <opencv2/core.hpp>

#include <string>

struct CanvasState {
  cv::Mat picture;  // BGR, drawn at the left (the reduction overlay or the plain image)
  std::string question;
  std::string answer;  // grows as tokens arrive
  std::string typing;  // a question being typed in the window
  std::string status;  // one line: what is happening, token counts, keys
};

// Renders the state into a BGR image `width` pixels wide, tall enough for the picture and the text
// (UTF-8, drawn with a Unicode font where OpenCV's freetype module and DejaVu Sans are present).
cv::Mat render_canvas(const CanvasState& state, int width = 1000);

// Whether text beyond ASCII is drawn (false: the Hershey fallback, '?' per non-ASCII character).
bool canvas_draws_unicode();
