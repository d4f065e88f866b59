// The VQA normaliser (spec §2): every worked example of §2.4, the contractions table, and the
// quirks a port must keep (capitalised keys, the 32-period limit, the digit-comma rule).
#include <gtest/gtest.h>

#include "apps/score/vqa_normalize.h"

namespace era::score {
namespace {

TEST(VqaNormalize, WorkedExamplesOfSection2_4) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Yes", "yes"},                          // 1
      {"Two", "2"},                            // 2
      {"The dog.", "dog"},                     // 3
      {"a red car", "red car"},                // 4
      {"3.5", "3.5"},                          // 5
      {"2.", "2"},                             // 6
      {".5", ".5"},                            // 7
      {"10,000", "10000"},                     // 8
      {"dont", "don't"},                       // 9
      {"Whats", "what's"},                     // 10
      {"man's hat", "man 's hat"},             // 11
      {"It's a cat", "it 's cat"},             // 12
      {"black-and-white", "black and white"},  // 13
      {"left - right", "left right"},          // 14
      {"Hello!", "hello"},                     // 15
      {"U.S.A.", "usa"},                       // 16
      {"none", "0"},                           // 17
      {"twenty-one", "twenty 1"},              // 18
      {"N/A", "n"},                            // 19
      {"(a)", ""},                             // 20
      {"yes, it is", "yes it is"},             // 21
      {"  Red\tcar ", "red car"},              // 22
      {"I'm", "i'm"},                          // 23
      {"$1.99", "$1.99"},                      // 24
      {"100%", "100%"},                        // 24
      {"12:30", "12:30"},                      // 24
      {"the the", ""},                         // 25
      {"eleven", "eleven"},                    // 26
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(vqa_normalize(in), want) << "input: \"" << in << "\"";
}

TEST(VqaNormalize, ContractionsTableHas120EntriesWithMmfQuirks) {
  const auto& table = vqa_contractions();
  EXPECT_EQ(table.size(), 120u);
  EXPECT_EQ(vqa_punctuation().size(), 21u);
  EXPECT_EQ(vqa_normalize("somebody'd"), "somebodyd");  // the one reversed entry
  EXPECT_EQ(vqa_normalize("couldnt've"), "couldn't've");
  EXPECT_EQ(vqa_normalize("y'allll"), "y'all'll");
  EXPECT_EQ(vqa_normalize("Ive"), "ive");  // the key "Ive" is capitalised: never matches
  EXPECT_EQ(vqa_normalize("Id've"), "id've");
  EXPECT_EQ(vqa_normalize("youre theyre"), "you're they're");
  EXPECT_EQ(vqa_normalize("lets"), "lets");  // MMF has "let's" (identity) but no "lets"
}

TEST(VqaNormalize, AtMost32PeriodsAreRemoved) {
  // 40 periods, none followed by a digit: re.sub(..., count=re.UNICODE=32) removes only 32.
  std::string in = "w";
  for (int i = 0; i < 40; ++i) in += ".w";
  std::string want(33, 'w');
  for (int i = 0; i < 8; ++i) want += ".w";
  EXPECT_EQ(vqa_normalize(in), want);
  EXPECT_EQ(vqa_process_punctuation("a.b.1"), "ab.1");
}

TEST(VqaNormalize, PunctuationRuleUsesTheOriginalText) {
  // Delete-mode when the character touches a space anywhere, or digit,digit occurs (server path,
  // where commas survive because there is no word_tokenize).
  EXPECT_EQ(vqa_process_punctuation("3,5"), "35");
  EXPECT_EQ(vqa_process_punctuation("a,b"), "a b");
  EXPECT_EQ(vqa_process_punctuation("x-y - z"), "xy  z");
  EXPECT_EQ(vqa_process_punctuation("man's"), "man's");  // ' is not in the set
  EXPECT_EQ(vqa_word_tokenize("What's THIS?"), "what 's this");
  EXPECT_EQ(vqa_process_digit_article("The One an  apple"), "1 apple");
}

TEST(VqaNormalize, FollowsPythonUnicodeLowerAndWhitespace) {
  EXPECT_EQ(vqa_normalize("\xC3\x89"
                          "COLE"),
            "\xC3\xA9"
            "cole");  // ÉCOLE -> école
  EXPECT_EQ(vqa_normalize("red\xC2\xA0"
                          "car"),
            "red car");                                                              // NBSP splits like str.split()
  EXPECT_EQ(vqa_normalize("\xD0\x9C\xD0\x98\xD0\xA0"), "\xD0\xBC\xD0\xB8\xD1\x80");  // МИР -> мир
  EXPECT_EQ(vqa_normalize("1.\xEF\xBC\x95"), "1.\xEF\xBC\x95");                      // a fullwidth digit is \d: the period stays
}

}  // namespace
}  // namespace era::score
