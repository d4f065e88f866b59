// The byte-level BPE against Hugging Face `tokenizers` (tests/python/make_bpe_refs.py: ids and
// decodes of ~700 strings, edge cases and seeded random mixes, for the Qwen2-style tokenizer the
// tiny Qwen2 checkpoints ship), and its refusals of what it cannot run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "era/error.h"
#include "test_support.h"
#include "text/byte_level_bpe.h"
#include "text/tokenizer.h"

namespace era {
namespace {

using json = nlohmann::json;

std::string tokenizer_path() { return test::source_dir() + "/tools/era_tools/data/qwen2_tokenizer/tokenizer.json"; }

const ByteLevelBpe& qwen2() {
  static const ByteLevelBpe bpe = ByteLevelBpe::from_file(tokenizer_path());
  return bpe;
}

json cases() { return json::parse(test::read_file(test::testdata_dir() + "/bpe/cases.json"))["cases"]; }

std::string printable(const std::string& s) { return json(s).dump(); }

TEST(ByteLevelBpe, IdsEqualTheTokenizersLibraryOnEveryCase) {
  const json all = cases();
  ASSERT_GT(all.size(), 600u);
  int failures = 0;
  for (const json& c : all) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = qwen2().encode(text);
    if (ids != c["ids"].get<std::vector<int64_t>>()) {
      ADD_FAILURE() << "text " << printable(text) << ": era " << json(ids).dump() << ", tokenizers " << c["ids"].dump();
      if (++failures == 10) break;
    }
  }
}

TEST(ByteLevelBpe, DecodeEqualsTheTokenizersLibraryWithAndWithoutSpecialTokens) {
  int failures = 0;
  for (const json& c : cases()) {
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(qwen2().decode(ids, false), c["decoded"].get<std::string>()) << printable(text);
    EXPECT_EQ(qwen2().decode(ids, true), c["decoded_skip_special"].get<std::string>()) << printable(text);
    if (HasFailure() && ++failures == 10) break;
  }
}

TEST(ByteLevelBpe, DecodingATokenCutInsideACharacterGivesReplacementCharacters) {
  // "😀" is four bytes; in this tokenizer it is several byte-level tokens. Decoding a prefix of
  // them leaves a broken sequence: one U+FFFD for it, as Rust's from_utf8_lossy.
  const auto ids = qwen2().encode("😀");
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(qwen2().decode(ids, false), "😀");
  const std::string cut = qwen2().decode({ids.begin(), ids.end() - 1}, false);
  EXPECT_EQ(cut, "\xEF\xBF\xBD");
}

TEST(ByteLevelBpe, GrowingTextHoldsACutCharacterRawAndIsOtherwiseTheDecode) {
  const auto ids = qwen2().encode("ok 🦀 €");  // the crab is three byte-level tokens here
  int cut = 0;
  for (size_t n = 0; n <= ids.size(); ++n) {
    const std::vector<int64_t> head(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string growing = qwen2().decode_growing(head, true);
    const std::string final_text = qwen2().decode(head, true);
    if (growing == final_text) continue;
    ++cut;
    // Only a cut character's first bytes differ: they replace the final U+FFFD.
    ASSERT_GE(final_text.size(), 3u);
    EXPECT_EQ(final_text.substr(final_text.size() - 3), "\xEF\xBF\xBD");
    EXPECT_EQ(growing.substr(0, final_text.size() - 3), final_text.substr(0, final_text.size() - 3));
    const unsigned char lead = static_cast<unsigned char>(growing[final_text.size() - 3]);
    EXPECT_GE(lead, 0xC2);
  }
  EXPECT_EQ(cut, 2);  // after the crab's first and second tokens
}

TEST(Tokenizer, AJsonFileIsTheByteLevelBpeAndStreamsWholeCharacters) {
  const Tokenizer t(tokenizer_path());
  EXPECT_TRUE(t.byte_level());
  EXPECT_EQ(t.encode("<image>\nHi 😀"), qwen2().encode("<image>\nHi 😀"));
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.size(), qwen2().size());
  const auto ids = t.encode("<|im_start|>Hi 🦀<|im_end|>");
  EXPECT_EQ(t.decode(ids), "Hi 🦀");  // special tokens skipped
  EXPECT_EQ(t.token_id("<video>"), qwen2().token_id("<video>"));
  const std::vector<int64_t> cut(ids.begin(), ids.end() - 2);  // inside the emoji
  EXPECT_NE(t.decode_growing(cut), t.decode(cut));
}

TEST(ByteLevelBpe, AddedAndSpecialTokensAreFoundByTheirText) {
  const int64_t image = *qwen2().token_id("<image>");
  const int64_t im_start = *qwen2().token_id("<|im_start|>");
  EXPECT_TRUE(qwen2().is_special(image));
  EXPECT_TRUE(qwen2().is_special(im_start));
  EXPECT_FALSE(qwen2().is_special(*qwen2().token_id("<tool_call>")));
  EXPECT_EQ(qwen2().encode("<image>"), std::vector<int64_t>{image});
  const auto ids = qwen2().encode("a<image>b");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), image), 1);
  EXPECT_EQ(qwen2().decode(ids, true), "ab");
  EXPECT_FALSE(qwen2().token_id("<not a token>").has_value());
}

TEST(ByteLevelBpe, InvalidUtf8IsRefusedNamingTheByte) {
  try {
    qwen2().encode(std::string("ok \xC3\x28 bad"));
    FAIL() << "accepted invalid UTF-8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPrompt);
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

// A tokenizer.json with one field changed is refused naming the file and that field.
void expect_refused(const std::function<void(json&)>& change, const std::string& field) {
  json doc = json::parse(test::read_file(tokenizer_path()));
  change(doc);
  try {
    ByteLevelBpe::from_json_text(doc.dump(), "/x/tokenizer.json");
    FAIL() << "accepted a tokenizer.json with a bad " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find("/x/tokenizer.json: " + field), std::string::npos) << e.what();
  }
}

TEST(ByteLevelBpe, WhatItCannotRunIsRefusedNamingTheField) {
  expect_refused([](json& d) { d["model"]["type"] = "WordPiece"; }, "model.type");
  expect_refused([](json& d) { d["model"]["byte_fallback"] = true; }, "model.byte_fallback");
  expect_refused([](json& d) { d["model"]["dropout"] = 0.1; }, "model.dropout");
  expect_refused([](json& d) { d["model"]["merges"][3] = json::array({"zz-not", "there"}); }, "model.merges[3]");
  expect_refused([](json& d) { d["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer.type");
  expect_refused([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithNext"; },
                 "pre_tokenizer.pretokenizers[0].behavior");
  expect_refused([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
                 "pre_tokenizer.pretokenizers[0].pattern.Regex");
  expect_refused([](json& d) { d["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre_tokenizer.type");
  expect_refused([](json& d) { d["decoder"] = {{"type", "Metaspace"}}; }, "decoder.type");
  expect_refused([](json& d) { d["added_tokens"][0].erase("id"); }, "added_tokens[0]");
  try {
    ByteLevelBpe::from_json_text("{not json", "/x/tokenizer.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(ByteLevelBpe, LstripRstripAndSingleWordAddedTokensFollowTheLibrary) {
  // The library's rules on a tokenizer whose one added token has each option (cases made by
  // tests/python/make_bpe_refs.py --options, in the same file).
  const json all = json::parse(test::read_file(test::testdata_dir() + "/bpe/cases.json"));
  ASSERT_TRUE(all.contains("option_cases"));
  for (const json& variant : all["option_cases"]) {
    json doc = json::parse(test::read_file(tokenizer_path()));
    doc["added_tokens"].push_back(variant["token"]);
    const ByteLevelBpe bpe = ByteLevelBpe::from_json_text(doc.dump(), "variant");
    for (const json& c : variant["cases"])
      EXPECT_EQ(bpe.encode(c["text"].get<std::string>()), c["ids"].get<std::vector<int64_t>>())
          << variant["token"].dump() << " on " << printable(c["text"].get<std::string>());
  }
}

}  // namespace
}  // namespace era
