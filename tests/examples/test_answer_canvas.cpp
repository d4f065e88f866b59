// The desktop example's window text (examples/desktop/answer_canvas.h): answers in any language
// are drawn with a Unicode font, not as "???" (OpenCV's Hershey fonts are ASCII only).
#include <gtest/gtest.h>

#ifdef ERA_TEST_DESKTOP_CANVAS
#include <opencv2/core.hpp>

#include "examples/desktop/answer_canvas.h"

namespace {

cv::Mat with_answer(const std::string& answer) {
  CanvasState s;
  s.picture = cv::Mat(336, 336, CV_8UC3, cv::Scalar(90, 90, 90));
  s.question = "Q";
  s.answer = answer;
  s.status = "status";
  return render_canvas(s);
}

double differing_pixels(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat diff;
  cv::absdiff(a, b, diff);
  return cv::countNonZero(diff.reshape(1));
}

TEST(DesktopCanvas, NonAsciiAnswersAreDrawnNotQuestionMarks) {
  ASSERT_TRUE(canvas_draws_unicode()) << "no Unicode font: tools/setup.sh installs fonts-dejavu-core";
  const cv::Mat accented = with_answer("caf\xC3\xA9 na\xC3\xAFve"), marks = with_answer("caf? na?ve"),
                plain = with_answer("cafe naive");
  ASSERT_EQ(accented.size(), marks.size());
  EXPECT_GT(differing_pixels(accented, marks), 20);                                              // é is not drawn as '?'
  EXPECT_GT(differing_pixels(accented, plain), 20);                                              // ...nor as a bare e
  EXPECT_GT(differing_pixels(with_answer("\xD0\x9C\xD0\xB8\xD1\x80"), with_answer("???")), 20);  // Cyrillic
}

}  // namespace
#endif
