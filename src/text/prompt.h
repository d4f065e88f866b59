#pragma once
// The conversation template and LLaVA's `tokenizer_image_token`: how a user question and its
// images become the token ids the decoder sees.
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace era {

// vicuna_v1 (separator style TWO), the template of all LLaVA-1.5 evaluation scripts:
//   "{system} USER: <image>\n{question} ASSISTANT:"
struct PromptTemplate {
  std::string name = "vicuna_v1";
  std::string system =
      "A chat between a curious user and an artificial intelligence assistant. "
      "The assistant gives helpful, detailed, and polite answers to the user's questions.";
  std::string user_role = "USER";
  std::string assistant_role = "ASSISTANT";
  std::string sep = " ";
  std::string image_placeholder = "<image>";
};

// Number of non-overlapping occurrences of `placeholder` in `text`.
int count_placeholders(const std::string& text, const std::string& placeholder);

// The full prompt for one user turn. If the question has no image placeholder and `num_images`
// is positive, one "<image>\n" per image goes in front of it (as LLaVA's eval scripts do);
// otherwise the question must contain exactly `num_images` placeholders.
std::string format_prompt(const PromptTemplate& tmpl, const std::string& question, int num_images);

// LLaVA's tokenizer_image_token: split on the placeholder, encode each chunk separately (each gets
// SentencePiece's dummy prefix), BOS once at the start, `image_token_id` between chunks.
std::vector<int64_t> tokenize_with_images(const Tokenizer& tokenizer, const std::string& prompt,
                                          const std::string& placeholder, int64_t image_token_id);

}  // namespace era
