#include "answer_canvas.h"

#include <opencv2/imgproc.hpp>
#ifdef ERA_DESKTOP_FREETYPE
#include <opencv2/freetype.hpp>
#endif

#include <cstdio>

#include <algorithm>
#include <sstream>
#include <vector>

namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr double kScale = 0.5;
constexpr int kLineHeight = 20;
constexpr int kFontPixels = 15;  // FreeType glyph height matching kScale's Hershey text

// The text of the window. OpenCV's built-in Hershey fonts draw ASCII only (anything else came out
// as "???"), so the answer, which may be any language, is drawn with FreeType and a Unicode font
// (DejaVu Sans, Debian's fonts-dejavu-core) where OpenCV has its freetype module; the Hershey font
// with '?' for non-ASCII is the fallback, said once on stderr.
class TextPainter {
 public:
  TextPainter() {
#ifdef ERA_DESKTOP_FREETYPE
    for (const char* font : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf"}) {
      try {
        auto ft = cv::freetype::createFreeType2();
        ft->loadFontData(font, 0);
        ft_ = ft;
        return;
      } catch (const cv::Exception&) {
      }
    }
#endif
    std::fprintf(stderr, "era_desktop: no Unicode font (install fonts-dejavu-core); non-ASCII text shows as '?'\n");
  }
  bool unicode() const { return !ft_.empty(); }
  int width(const std::string& text) const {
    int baseline = 0;
#ifdef ERA_DESKTOP_FREETYPE
    if (!ft_.empty()) return ft_->getTextSize(text, kFontPixels, -1, &baseline).width;
#endif
    return cv::getTextSize(ascii(text), kFont, kScale, 1, &baseline).width;
  }
  void draw(cv::Mat& canvas, const std::string& text, cv::Point at, const cv::Scalar& colour, double scale = 1.0) const {
#ifdef ERA_DESKTOP_FREETYPE
    if (!ft_.empty()) {
      ft_->putText(canvas, text, at, static_cast<int>(kFontPixels * scale), colour, -1, cv::LINE_AA, true);
      return;
    }
#endif
    cv::putText(canvas, ascii(text), at, kFont, kScale * scale, colour, 1, cv::LINE_AA);
  }

 private:
  // One '?' per UTF-8 character that is not ASCII (the Hershey fonts have no other glyphs).
  static std::string ascii(const std::string& text) {
    std::string out;
    for (const char ch : text) {
      const unsigned char c = static_cast<unsigned char>(ch);
      if (c < 0x80) out += ch;
      else if ((c & 0xC0) != 0x80) out += '?';
    }
    return out;
  }
#ifdef ERA_DESKTOP_FREETYPE
  cv::Ptr<cv::freetype::FreeType2> ft_;
#else
  struct None {
    bool empty() const { return true; }
  } ft_;
#endif
};

const TextPainter& painter() {
  static const TextPainter p;
  return p;
}

// Greedy word wrap to `width` pixels at the canvas font.
std::vector<std::string> wrap(const std::string& text, int width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs(text);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    std::istringstream words(paragraph);
    std::string line;
    for (std::string word; words >> word;) {
      const std::string candidate = line.empty() ? word : line + " " + word;
      if (!line.empty() && painter().width(candidate) > width) {
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
    painter().draw(canvas, l, at, colour);
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
  painter().draw(canvas, s.status, {margin, canvas.rows - 10}, cv::Scalar(170, 170, 170), 0.9);
  return canvas;
}

bool canvas_draws_unicode() { return painter().unicode(); }
