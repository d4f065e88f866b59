// UTF-8 per Unicode's Table 3-7: the lossy decoding equals Python's bytes.decode("utf-8",
// "replace") (the same maximal-subpart rule as Rust's from_utf8_lossy), and the growing-text tail.
#include <gtest/gtest.h>

#include "util/utf8.h"

namespace era::utf8 {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, LossyReplacesEachMaximalSubpartOnce) {
  EXPECT_EQ(lossy("plain ascii"), "plain ascii");
  EXPECT_EQ(lossy("\xE2\x82\xAC \xF0\x9F\xA6\x80"), "\xE2\x82\xAC \xF0\x9F\xA6\x80");
  EXPECT_EQ(lossy("a\x80"
                  "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(lossy("\xF0\x9F\x98"), kFffd);  // a cut 4-byte sequence: one
  EXPECT_EQ(lossy("\xE2\x82"
                  "A"),
            kFffd + "A");
  EXPECT_EQ(lossy("\xE0\x80\x80"), kFffd + kFffd + kFffd);              // overlong: E0 takes A0..BF only
  EXPECT_EQ(lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // beyond U+10FFFF
  EXPECT_EQ(lossy("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(lossy("\xFF"), kFffd);
}

TEST(Utf8, SequenceLengthIsZeroWhereNoWellFormedSequenceStarts) {
  EXPECT_EQ(sequence_length("a", 0), 1u);
  EXPECT_EQ(sequence_length("\xC3\xA9", 0), 2u);
  EXPECT_EQ(sequence_length("\xE2\x82\xAC", 0), 3u);
  EXPECT_EQ(sequence_length("\xF0\x9F\xA6\x80", 0), 4u);
  EXPECT_EQ(sequence_length("\xC3", 0), 0u);
  EXPECT_EQ(sequence_length("\x80", 0), 0u);
  EXPECT_EQ(sequence_length("\xED\xA0\x80", 0), 0u);
}

TEST(Utf8, IncompleteTailIsAWellFormedStartOnly) {
  EXPECT_EQ(incomplete_tail("ab\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_tail("ab\xE2"), 2u);
  EXPECT_EQ(incomplete_tail("\xF0\x9F\xA6"), 0u);
  EXPECT_EQ(incomplete_tail("ab\xE2\x82\xAC"), 5u);  // complete
  EXPECT_EQ(incomplete_tail("ab\x80"), 3u);          // a stray continuation byte starts nothing
  EXPECT_EQ(incomplete_tail("ab\xE0\x80"), 4u);      // can never complete
  EXPECT_EQ(incomplete_tail(""), 0u);
}

}  // namespace
}  // namespace era::utf8
