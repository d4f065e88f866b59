// Tokens must equal Python sentencepiece's chunked encoding (LLaVA's tokenizer_image_token) on a
// prompt corpus; the fixture tests/python/make_token_refs.py writes the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "test_support.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace era {
namespace {

nlohmann::json load_refs() {
  std::ifstream in(test::testdata_dir() + "/tokens.json");
  EXPECT_TRUE(in.good()) << "missing tokens.json fixture";
  return nlohmann::json::parse(in);
}

Tokenizer& tokenizer() {
  static Tokenizer tok(test::checkpoint_dir() + "/tokenizer.model");
  return tok;
}

TEST(PromptTokens, RawPromptsMatchPythonChunkedEncoding) {
  const auto refs = load_refs();
  const int64_t image_id = refs["image_token_id"];
  int n = 0;
  for (const auto& c : refs["cases"]) {
    if (c["kind"] != "raw") continue;
    const std::string prompt = c["prompt"];
    const auto ids = tokenize_with_images(tokenizer(), prompt, "<image>", image_id);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int64_t>>()) << "prompt: [" << prompt << "]";
    ++n;
  }
  EXPECT_GE(n, 15);
}

TEST(PromptTokens, VicunaTemplateMatchesReference) {
  const auto refs = load_refs();
  const int64_t image_id = refs["image_token_id"];
  PromptTemplate tmpl;
  EXPECT_EQ(tmpl.system, refs["system"].get<std::string>());
  for (const auto& c : refs["cases"]) {
    if (c["kind"] != "question") continue;
    const std::string prompt = format_prompt(tmpl, c["question"], c["num_images"]);
    EXPECT_EQ(prompt, c["prompt"].get<std::string>());
    EXPECT_EQ(tokenize_with_images(tokenizer(), prompt, "<image>", image_id), c["ids"].get<std::vector<int64_t>>());
  }
}

TEST(PromptTokens, DecodeSkipsSpecialTokens) {
  const auto refs = load_refs();
  for (const auto& d : refs["decodes"]) {
    EXPECT_EQ(tokenizer().decode(d["ids"].get<std::vector<int64_t>>()), d["text"].get<std::string>());
  }
}

TEST(PromptTokens, BosOnceAndImageBetweenChunks) {
  const auto ids = tokenize_with_images(tokenizer(), "a <image> b <image> c", "<image>", 1000);
  EXPECT_EQ(ids.front(), tokenizer().bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tokenizer().bos_id()), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1000), 2);
}

TEST(PromptTemplate, PlaceholderCountMustMatchImages) {
  PromptTemplate tmpl;
  EXPECT_EQ(format_prompt(tmpl, "Q?", 2), tmpl.system + " USER: <image>\n<image>\nQ? ASSISTANT:");
  EXPECT_EQ(format_prompt(tmpl, "Q?", 0), tmpl.system + " USER: Q? ASSISTANT:");
  try {
    format_prompt(tmpl, "<image> and <image>", 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPrompt);
    EXPECT_NE(std::string(e.what()).find("2 <image> placeholder"), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, MissingModelIsABundleError) {
  try {
    Tokenizer t("/nonexistent/tokenizer.model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.model"), std::string::npos);
  }
}

}  // namespace
}  // namespace era

namespace era {
namespace {

// Multi-turn conversations against LLaVA's get_prompt, ported on its own in
// tests/python/references/prompt_reference.py; ids from HF-style special-token splitting.
TEST(PromptTokens, ConversationsMatchLlavaGetPrompt) {
  const auto refs = load_refs();
  const int64_t image_id = refs["image_token_id"];
  const Tokenizer& tok = tokenizer();
  int styles = 0, with_ids = 0;
  for (const auto& c : refs["conversations"]) {
    PromptTemplate tmpl;
    ASSERT_TRUE(find_prompt_template(c["style"], &tmpl)) << c["style"];
    std::vector<Turn> history;
    for (const auto& t : c["history"]) history.push_back({t[0].get<std::string>(), t[1].get<std::string>()});
    const std::string prompt = format_conversation(tmpl, history, c["question"], c["num_images"]);
    EXPECT_EQ(prompt, c["prompt"].get<std::string>()) << c["style"];
    ++styles;
    if (!c.contains("ids")) continue;
    const std::vector<AddedToken> specials{{tok.piece(tok.bos_id()), tok.bos_id()}, {tok.piece(tok.eos_id()), tok.eos_id()}};
    EXPECT_EQ(tokenize_with_images(tok, prompt, "<image>", image_id, specials), c["ids"].get<std::vector<int64_t>>())
        << c["style"];
    ++with_ids;
  }
  EXPECT_EQ(styles, 4);
  EXPECT_EQ(with_ids, 2);
}

// Images go where the conversation writes them; with no placeholder anywhere, in front of the
// first user text; a wrong count names both numbers.
TEST(PromptTokens, ConversationImagesFillPlaceholdersInOrder) {
  PromptTemplate tmpl;
  const std::vector<Turn> history{{"First?", "One."}, {"<image>\nSecond?", "Two."}};
  const std::string explicit_place = format_conversation(tmpl, history, "Third <image>?", 2);
  EXPECT_EQ(explicit_place, tmpl.system +
                                " USER: First? ASSISTANT: One.</s>USER: <image>\nSecond? ASSISTANT: Two.</s>"
                                "USER: Third <image>? ASSISTANT:");
  const std::string implicit = format_conversation(tmpl, {{"First?", "One."}}, "Again?", 2);
  EXPECT_EQ(implicit, tmpl.system + " USER: <image>\n<image>\nFirst? ASSISTANT: One.</s>USER: Again? ASSISTANT:");
  try {
    format_conversation(tmpl, history, "Third?", 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPrompt);
    EXPECT_NE(std::string(e.what()).find("1 <image> placeholder(s) but 2 image(s)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era
