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
