#pragma once
// The conversation templates and LLaVA's `tokenizer_image_token`: how a user question and its
// images become the token ids the decoder sees.
#include <cstdint>
#include <string>
#include <vector>

#include "era/era.h"
#include "text/tokenizer.h"

namespace era {

// The conversation styles era formats (manifest `prompt.template`), one user turn each:
//   vicuna_v1         "{system} USER: {user} ASSISTANT:"  (LLaVA conv_vicuna_v1; all LLaVA-1.5 and
//                      llava-v1.6-vicuna evaluation, and the llava-hf chat template of both)
//   mistral_instruct  "[INST] {user} [/INST]"  (LLaVA conv_mistral_instruct, separator style
//                      LLAMA_2, empty system; also llava-v1.6-mistral-7b-hf's chat template). A
//                      non-empty system goes in front of the user text as "<<SYS>>\n{system}\n<</SYS>>\n\n".
//   chatml_direct     "<|im_start|>system\n{system}<|im_end|><|im_start|>user\n{user}<|im_end|>
//                      <|im_start|>assistant\n"  (LLaVA conv_chatml_direct, separator style MPT,
//                      system "Answer the questions."; what llava-v1.6-34b's evaluation uses)
//   chatml            "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n" with an optional
//                      "<|im_start|>system\n{system}<|im_end|>\n" first (the llava-hf 34b chat
//                      template: no default system, a newline after every <|im_end|>)
//   qwen_1_5          chatml with the system "You are a helpful assistant." (LLaVA conv_qwen_1_5:
//                      LLaVA-OneVision / LLaVA-Video evaluation in lmms-eval)
// Where {user} is "<image>\n" per image followed by the question.
enum class TemplateStyle { kVicunaV1, kMistralInstruct, kChatmlDirect, kChatml };

struct PromptTemplate {
  std::string name = "vicuna_v1";
  TemplateStyle style = TemplateStyle::kVicunaV1;
  std::string system =
      "A chat between a curious user and an artificial intelligence assistant. "
      "The assistant gives helpful, detailed, and polite answers to the user's questions.";
  // vicuna_v1 only (LLaVA's separator style TWO): role names and the separator between turns.
  std::string user_role = "USER";
  std::string assistant_role = "ASSISTANT";
  std::string sep = " ";
  std::string image_placeholder = "<image>";
  std::string video_placeholder = "<video>";  // families that take video (LLaVA-OneVision)
};

// The template names era knows, in table order ("vicuna_v1", "mistral_instruct", ...).
std::vector<std::string> known_prompt_templates();

// The template `name` with its default system text; false if era has no template of that name.
bool find_prompt_template(const std::string& name, PromptTemplate* out);

// Number of non-overlapping occurrences of `placeholder` in `text`.
int count_placeholders(const std::string& text, const std::string& placeholder);

// The full prompt for one user turn. If the question has no image placeholder and `num_images`
// is positive, one "<image>\n" per image goes in front of it (as LLaVA's eval scripts do);
// otherwise the question must contain exactly `num_images` placeholders. Videos likewise with
// "<video>\n" (after the images' placeholders when both are placed).
std::string format_prompt(const PromptTemplate& tmpl, const std::string& question, int num_images, int num_videos = 0);

// A conversation: the earlier exchanges `history` (oldest first), then the new `question`, in
// LLaVA's multi-turn layout of each style (conversation.py's get_prompt), ending where the
// assistant's next answer starts:
//   vicuna_v1         "{system} USER: {u1} ASSISTANT: {a1}</s>USER: {q} ASSISTANT:"
//   mistral_instruct  "[INST] {u1} [/INST] {a1} </s><s>[INST] {q} [/INST]"
//   chatml_direct     "...<|im_start|>user\n{u1}<|im_end|><|im_start|>assistant\n{a1}<|im_end|><|im_start|>user\n..."
//   chatml            the same with "\n" after every <|im_end|>
// "<s>" / "</s>" are the tokenizer's BOS / EOS pieces, which tokenize_with_images turns into
// their ids (as HF's tokenizer does with special tokens in text). Images: the placeholders of
// all user texts, in order, must number `num_images`; if there are none, the images go in front
// of the first user text. Throws era::Error(kPrompt) otherwise.
std::string format_conversation(const PromptTemplate& tmpl, const std::vector<Turn>& history, const std::string& question,
                                int num_images, int num_videos = 0);

// A piece of text that is one token of its own and never goes through SentencePiece: the HF
// tokenizer's added tokens (ChatML's "<|im_start|>" / "<|im_end|>" in Yi's vocabulary).
struct AddedToken {
  std::string content;
  int64_t id = -1;
};

// LLaVA's tokenizer_image_token: BOS once at the start; the prompt is split on the image
// placeholder (-> `image_token_id`) and on every added token (-> its id); each text chunk in
// between is encoded on its own (each gets SentencePiece's dummy prefix), as HF's slow LLaMA
// tokenizer, which LLaVA's evaluation uses, does. Where two matches start at the same place the
// longer wins.
std::vector<int64_t> tokenize_with_images(const Tokenizer& tokenizer, const std::string& prompt, const std::string& placeholder,
                                          int64_t image_token_id, const std::vector<AddedToken>& added_tokens = {});

}  // namespace era
