#include "answer_canvas.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr double kScale = 0.5;
constexpr int kLineHeight = 20;

// Greedy word wrap to `width` pixels at the canvas font.
std::vector<std::string> wrap(const std::string& text, int width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    std::istringstream words(paragraph);
    std::string line;
    for (std::string word; words >> word;) {
      const std::string candidate = line.empty() ? word : line + " " + word;
      int baseline = 0;
      if (!line.empty() && cv::getTextSize(candidate, kFont, kScale, 1, &baseline).width > width) {
        lines.push_back(line);
        line = word;
      } else {
        line = candidate;
      }
    }
    lines.push_back(line);
  }
  return lines;
}

int put_lines(cv::Mat& canvas, const std::vector<std::string>& lines, cv::Point at, const cv::Scalar& colour) {
  for (const auto& l : lines) {
    cv::putText(canvas, l, at, kFont, kScale, colour, 1, cv::LINE_AA);
    at.y += kLineHeight;
  }
  return at.y;
}

}  // namespace

cv::Mat render_canvas(const CanvasState& s, int width) {
  const int margin = 12;
  const int picture_side = s.picture.empty() ? 336 : std::max(s.picture.rows, s.picture.cols);
  const int canvas_width = std::max(width, picture_side + 300);
  const int text_x = margin * 2 + picture_side;
  const int text_width = canvas_width - text_x - margin;
  const auto question = wrap("Q: " + s.question, text_width);
  const auto answer = wrap("A: " + s.answer, text_width);
  const auto typing = s.typing.empty() ? std::vector<std::string>{} : wrap("> " + s.typing + "_", text_width);
  // Tall enough for the picture and for the whole text (a long answer grows the window).
  const int text_height = margin + 16 + kLineHeight * static_cast<int>(question.size() + answer.size() + typing.size()) + 24;
  const int height = std::max({picture_side + 2 * margin + 30, text_height + 30, 420});
  cv::Mat canvas(height, canvas_width, CV_8UC3, cv::Scalar(40, 34, 30));
  if (!s.picture.empty()) s.picture.copyTo(canvas(cv::Rect(margin, margin, s.picture.cols, s.picture.rows)));

  int y = margin + 16;
  y = put_lines(canvas, question, {text_x, y}, cv::Scalar(120, 200, 255));
  y = put_lines(canvas, answer, {text_x, y + 8}, cv::Scalar(235, 235, 235));
  put_lines(canvas, typing, {text_x, y + 16}, cv::Scalar(140, 255, 140));
  cv::putText(canvas, s.status, {margin, canvas.rows - 10}, kFont, 0.45, cv::Scalar(170, 170, 170), 1, cv::LINE_AA);
  return canvas;
}
