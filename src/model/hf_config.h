#pragma once
// Internal header. The parts of a manifest every family builds the same way from a Hugging Face
// folder instead of reading them from a bundle's manifest.json (family/<name>/ builds the rest):
//   - "text" from config.json's text_config, with transformers' class defaults of its model_type
//     (LlamaConfig, MistralConfig, Qwen2Config) for every absent field;
//   - "tokens", "prompt" and files.tokenizer from the tokenizer files: tokenizer.model
//     (SentencePiece) or tokenizer.json (byte-level BPE), tokenizer_config.json, added_tokens.json,
//     generation_config.json, and the chat template (chat_template.jinja, chat_template.json or
//     tokenizer_config.json's), recognised as one of era's template modes.
// What tools/era_tools/checkpoint_base.py writes into an exported bundle's manifest, field for
// field (tests/model/test_hf_folder.cpp compares the two). Every refusal is one era::Error(kBundle)
// "FILE: field = value: rule" or "FILE: what".
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace era {

// `section` over `defaults`: what transformers' config classes read for absent fields.
nlohmann::json with_defaults(const nlohmann::json& section, const nlohmann::json& defaults);

// The manifest's "text" section from config.json (`config`, read from `config_path`); the text
// model's type defaults to `default_type` where text_config has none. Refuses a type era's decoder
// does not implement, RoPE scaling, biases, a sliding window of Qwen2, a non-SiLU activation.
nlohmann::json hf_text_section(const nlohmann::json& config, const std::string& config_path, const std::string& default_type);

// What the tokenizer files say.
struct HfTokenizer {
  std::string file;                         // "tokenizer.model" or "tokenizer.json", in the folder
  int64_t vocab_size = 0;                   // its pieces (SentencePiece), 1 + its largest id (BPE)
  int64_t bos_id = -1, eos_id = -1;         // SentencePiece's; BPE: none, tokenizer_config's eos_token
  std::map<std::string, int64_t> specials;  // every piece that is one id in a prompt ("<image>" left out)
  std::string chat_template;                // the checkpoint's own ("" where it has none)
  std::vector<int64_t> generation_eos;      // generation_config.json's eos_token_id
};

// The tokenizer of `dir` for a text model of `text_model_type` ("llama" and "mistral":
// SentencePiece; "qwen2": byte-level BPE) and `vocab_size` ids.
HfTokenizer read_hf_tokenizer(const std::string& dir, const std::string& text_model_type, int64_t vocab_size);

// The LLaVA evaluation template of a checkpoint whose family has none of its own, from its chat
// template's text (ChatML, "[INST]", "USER"/"ASSISTANT"), else its ChatML tokens, else its text
// model: "chatml_direct", "mistral_instruct" or "vicuna_v1".
std::string default_template_name(const HfTokenizer& tokenizer, const std::string& text_model_type);

// Sets the manifest's "tokens" (ids, stops, added tokens; image_token_id and pad_id as given) and
// "prompt" (template `template_name`) sections and files.tokenizer; refuses a template whose
// markers are not single tokens of this tokenizer, naming them.
void set_tokens_and_prompt(nlohmann::json& manifest, const std::string& dir, const HfTokenizer& tokenizer,
                           const std::string& template_name, int64_t image_token_id, int64_t pad_id);

// A JSON file of the folder as an object; an empty object where `required` is false and the file
// is absent. Refuses unreadable or invalid JSON, naming the file.
nlohmann::json read_json_file(const std::string& path, const std::string& what, bool required);

// JSON reading as transformers' configs do it: an integer (not a boolean, not 2.0), Python's
// truthiness, and the refusal "WHERE: what" (era::Error(kBundle)).
bool json_is_integer(const nlohmann::json& v);
bool json_truthy(const nlohmann::json& v);
[[noreturn]] void refuse_config(const std::string& where, const std::string& what);

// A positive integer of a config object, refused naming `where` and the field.
int64_t positive_integer(const nlohmann::json& object, const std::string& key, const std::string& where);

}  // namespace era
