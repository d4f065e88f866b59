// The conversation-template table (vicuna_v1, mistral_instruct, chatml_direct, chatml), the
// manifest's refusal of a template this build does not know, stop ids and the sliding-window
// context limit, and added tokens (ChatML's markers) cut out before SentencePiece.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "model/manifest.h"
#include "runtime/generator.h"
#include "test_support.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace era {
namespace {

namespace fs = std::filesystem;

PromptTemplate named(const std::string& name) {
  PromptTemplate t;
  EXPECT_TRUE(find_prompt_template(name, &t)) << name;
  return t;
}

// The expected strings are LLaVA's conversation.py templates (conv_mistral_instruct: LLAMA_2 style,
// conv_chatml_direct: MPT style) and the llava-hf 34b chat template, written out by hand.
TEST(PromptTemplates, EveryStyleFormatsOneUserTurn) {
  EXPECT_EQ(format_prompt(named("mistral_instruct"), "What is shown?", 1), "[INST] <image>\nWhat is shown? [/INST]");
  EXPECT_EQ(format_prompt(named("chatml_direct"), "What is shown?", 1),
            "<|im_start|>system\nAnswer the questions.<|im_end|><|im_start|>user\n<image>\nWhat is shown?<|im_end|>"
            "<|im_start|>assistant\n");
  EXPECT_EQ(format_prompt(named("chatml"), "What is shown?", 1),
            "<|im_start|>user\n<image>\nWhat is shown?<|im_end|>\n<|im_start|>assistant\n");
  const PromptTemplate vicuna = named("vicuna_v1");
  EXPECT_EQ(format_prompt(vicuna, "Q?", 1), vicuna.system + " USER: <image>\nQ? ASSISTANT:");
  EXPECT_EQ(vicuna.system, PromptTemplate{}.system);
}

TEST(PromptTemplates, SystemTextGoesWhereEachStylePutsIt) {
  PromptTemplate mistral = named("mistral_instruct");
  mistral.system = "Be brief.";
  EXPECT_EQ(format_prompt(mistral, "Q?", 0), "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nQ? [/INST]");
  PromptTemplate chatml = named("chatml");
  chatml.system = "Be brief.";
  EXPECT_EQ(format_prompt(chatml, "Q?", 0),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n");
}

// LLaVA's conv_qwen_1_5, as lmms-eval prompts LLaVA-OneVision / LLaVA-Video.
TEST(PromptTemplates, Qwen15IsChatmlWithItsSystemTurn) {
  const PromptTemplate qwen = named("qwen_1_5");
  EXPECT_EQ(format_prompt(qwen, "Q?", 1),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<image>\nQ?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(PromptTemplates, PlaceholderCountCheckedInEveryStyle) {
  for (const auto& name : known_prompt_templates()) {
    EXPECT_THROW(format_prompt(named(name), "<image> and <image>", 1), Error) << name;
    EXPECT_NE(format_prompt(named(name), "a <image> b", 1).find("a <image> b"), std::string::npos) << name;
  }
}

TEST(PromptTemplates, UnknownNameNotFound) {
  PromptTemplate t;
  EXPECT_FALSE(find_prompt_template("llama3", &t));
  EXPECT_EQ(known_prompt_templates(),
            (std::vector<std::string>{"vicuna_v1", "mistral_instruct", "chatml_direct", "chatml", "qwen_1_5"}));
}

// Added tokens: one id each, wherever they are, and the text between them encoded chunk by chunk
// (as the image placeholder always was).
TEST(PromptTemplates, AddedTokensBecomeTheirIds) {
  Tokenizer tok(test::checkpoint_dir() + "/tokenizer.model");
  const std::vector<AddedToken> added{{"<|im_start|>", 1002}, {"<|im_end|>", 1003}};
  const std::string prompt = "<|im_start|>user\n<image>\nWhat?<|im_end|><|im_start|>assistant\n";
  std::vector<int64_t> expected{tok.bos_id(), 1002};
  auto add = [&](const std::string& text) {
    const auto ids = tok.encode(text);
    expected.insert(expected.end(), ids.begin(), ids.end());
  };
  add("user\n");
  expected.push_back(1000);
  add("\nWhat?");
  expected.push_back(1003);
  expected.push_back(1002);
  add("assistant\n");
  EXPECT_EQ(tokenize_with_images(tok, prompt, "<image>", 1000, added), expected);
  // Without the table the markers are ordinary text: more ids, none of them 1002 / 1003.
  const auto plain = tokenize_with_images(tok, prompt, "<image>", 1000);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1002), 0);
  EXPECT_GT(plain.size(), expected.size());
}

TEST(PromptTemplates, LongerAddedTokenWinsAtTheSamePlace) {
  Tokenizer tok(test::checkpoint_dir() + "/tokenizer.model");
  const std::vector<AddedToken> added{{"<|im", 1005}, {"<|im_end|>", 1003}};
  EXPECT_EQ(tokenize_with_images(tok, "<|im_end|>", "<image>", 1000, added), (std::vector<int64_t>{tok.bos_id(), 1003}));
}

TEST(StopTokens, AnyStopIdEndsAnAnswer) {
  const std::vector<int64_t> stops{2, 7};
  EXPECT_TRUE(is_stop_token(stops, 2));
  EXPECT_TRUE(is_stop_token(stops, 7));
  EXPECT_FALSE(is_stop_token(stops, 6));
}

TEST(SlidingWindow, ContextIsTheSmallerOfWindowAndPositions) {
  TextSpec t;
  t.max_position_embeddings = 32768;
  EXPECT_EQ(t.context_limit(), 32768);
  t.sliding_window = 4096;
  EXPECT_EQ(t.context_limit(), 4096);
  t.sliding_window = 65536;
  EXPECT_EQ(t.context_limit(), 32768);
}

// ---- manifest ---------------------------------------------------------------------------------

class ManifestPrompt : public ::testing::Test {
 protected:
  // A copy of the test bundle's manifest, edited by `change`, read back. Each test has its own
  // folder: ctest runs these tests as separate processes at once, and a shared manifest.json was
  // rewritten by one test while another read it (CI, stop 43).
  Manifest read_with(const std::function<void(nlohmann::json&)>& change) {
    const fs::path dir = test::scratch_dir_for_this_test();
    std::ifstream in(test::bundle_dir() + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    change(j);
    std::ofstream(dir / "manifest.json") << j.dump(1);
    return read_manifest(dir.string());
  }
  std::string error_of(const std::function<void(nlohmann::json&)>& change) {
    try {
      read_with(change);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBundle);
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(ManifestPrompt, UnknownTemplateRefusedNamingFieldAndValue) {
  const std::string msg = error_of([](nlohmann::json& j) { j["prompt"]["template"] = "llama3"; });
  EXPECT_NE(msg.find("prompt.template 'llama3'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("chatml_direct"), std::string::npos) << msg;  // says what would work
}

TEST_F(ManifestPrompt, ChatmlManifestReadWithItsTokens) {
  const Manifest m = read_with([](nlohmann::json& j) {
    j["prompt"] = {{"template", "chatml_direct"}, {"system", "Answer the questions."}, {"image_placeholder", "<image>"}};
    j["tokens"]["stop_ids"] = {2, 1003};
    j["tokens"]["added_tokens"] = nlohmann::json::array({{{"content", "<|im_start|>"}, {"id", 1002}}});
    j["text"]["sliding_window"] = 1024;
  });
  EXPECT_EQ(m.prompt.style, TemplateStyle::kChatmlDirect);
  EXPECT_EQ(m.tokens.stop_ids, (std::vector<int64_t>{2, 1003}));
  ASSERT_EQ(m.tokens.added_tokens.size(), 1u);
  EXPECT_EQ(m.tokens.added_tokens[0].content, "<|im_start|>");
  EXPECT_EQ(m.text.context_limit(), 1024);
}

TEST_F(ManifestPrompt, OldManifestStopsAtEosOnly) {
  const Manifest m = read_with([](nlohmann::json& j) {
    j["tokens"].erase("stop_ids");
    j["tokens"].erase("added_tokens");
    j["text"].erase("sliding_window");
  });
  EXPECT_EQ(m.tokens.stop_ids, std::vector<int64_t>{m.tokens.eos_id});
  EXPECT_EQ(m.text.sliding_window, 0);
}

TEST_F(ManifestPrompt, BadTokenTablesRefusedNamingTheItem) {
  EXPECT_NE(error_of([](nlohmann::json& j) { j["tokens"]["stop_ids"] = {2, 99999}; }).find("tokens.stop_ids"), std::string::npos);
  EXPECT_NE(error_of([](nlohmann::json& j) {
              j["tokens"]["added_tokens"] = nlohmann::json::array({{{"content", "<x>"}, {"id", 99999}}});
            }).find("tokens.added_tokens[0].id"),
            std::string::npos);
  EXPECT_NE(error_of([](nlohmann::json& j) { j["text"]["sliding_window"] = 0; }).find("text.sliding_window"), std::string::npos);
}

}  // namespace
}  // namespace era
