#include "model/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "era/error.h"
#include "model/manifest_fields.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/input_file.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// transformers' config class defaults (LlamaConfig, MistralConfig, Qwen2Config) for every field
// era reads; MistralConfig's sliding_window is 4096 where absent (an explicit null means none).
const json& text_defaults(const std::string& type) {
  static const json llama = {{"vocab_size", 32000},        {"hidden_size", 4096},
                             {"intermediate_size", 11008}, {"num_hidden_layers", 32},
                             {"num_attention_heads", 32},  {"num_key_value_heads", nullptr},
                             {"hidden_act", "silu"},       {"max_position_embeddings", 2048},
                             {"rms_norm_eps", 1e-6},       {"rope_theta", 10000.0},
                             {"rope_scaling", nullptr},    {"attention_bias", false},
                             {"mlp_bias", false},          {"tie_word_embeddings", false}};
  static const json mistral = {{"vocab_size", 32000},     {"hidden_size", 4096},       {"intermediate_size", 14336},
                               {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                               {"head_dim", nullptr},     {"hidden_act", "silu"},      {"max_position_embeddings", 4096 * 32},
                               {"rms_norm_eps", 1e-6},    {"rope_theta", 10000.0},     {"rope_scaling", nullptr},
                               {"attention_bias", false}, {"mlp_bias", false},         {"tie_word_embeddings", false},
                               {"sliding_window", 4096}};
  static const json qwen2 = {{"vocab_size", 151936},         {"hidden_size", 4096},        {"intermediate_size", 22016},
                             {"num_hidden_layers", 32},      {"num_attention_heads", 32},  {"num_key_value_heads", 32},
                             {"head_dim", nullptr},          {"hidden_act", "silu"},       {"max_position_embeddings", 32768},
                             {"rms_norm_eps", 1e-6},         {"rope_theta", 10000.0},      {"rope_scaling", nullptr},
                             {"tie_word_embeddings", false}, {"use_sliding_window", false}};
  static const json none;
  if (type == "llama") return llama;
  if (type == "mistral") return mistral;
  if (type == "qwen2") return qwen2;
  return none;
}

// The content of a special-token field (a string, or transformers' {"content": ...}); "" otherwise.
std::string token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

const char* kImStart = "<|im_start|>";
const char* kImEnd = "<|im_end|>";

bool is_chatml(TemplateStyle style) { return style == TemplateStyle::kChatml || style == TemplateStyle::kChatmlDirect; }

}  // namespace

bool json_is_integer(const json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

bool json_truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

void refuse_config(const std::string& where, const std::string& what) { throw Error(ErrorCode::kBundle, where + ": " + what); }

json read_json_file(const std::string& path, const std::string& what, bool required) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (required) refuse_config(path, what + " not found");
    return json::object();
  }
  json data;
  try {
    data = json::parse(read_input_file(path, what, 256 << 20, ErrorCode::kBundle));
  } catch (const json::exception& e) {
    refuse_config(path, "not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!data.is_object()) refuse_config(path, what + " is not a JSON object");
  return data;
}

json with_defaults(const json& section, const json& defaults) {
  json out = defaults.is_object() ? defaults : json::object();
  if (section.is_object())
    for (const auto& [k, v] : section.items()) out[k] = v;
  return out;
}

int64_t positive_integer(const json& object, const std::string& key, const std::string& where) {
  const json v = object.contains(key) ? object[key] : json();
  if (!json_is_integer(v) || v.get<int64_t>() <= 0)
    refuse_config(where, key + " = " + shown_json(v) + ": must be a positive integer");
  return v.get<int64_t>();
}

json hf_text_section(const json& config, const std::string& path, const std::string& default_type) {
  const json raw = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : json();
  const std::string where = path + ": text_config";
  const std::string type = raw.is_object() && raw.contains("model_type") && raw["model_type"].is_string()
                               ? raw["model_type"].get<std::string>()
                               : default_type;
  if (text_defaults(type).is_null())
    refuse_config(path, "text_config.model_type = \"" + type + "\": not a decoder era implements (llama, mistral, qwen2)");
  json tc = with_defaults(raw, text_defaults(type));
  // very old llava configs kept the vocabulary size at the top level only
  if (!raw.is_object() || !raw.contains("vocab_size")) tc["vocab_size"] = config.value("vocab_size", tc["vocab_size"]);
  // transformers 5 keeps rope_theta in rope_parameters
  if (tc.contains("rope_parameters") && tc["rope_parameters"].is_object()) {
    const json& rp = tc["rope_parameters"];
    if (rp.value("rope_type", std::string("default")) != "default")
      refuse_config(where, "rope_parameters = " + shown_json(rp) + ": not supported (only the default RoPE)");
    if (rp.contains("rope_theta")) tc["rope_theta"] = rp["rope_theta"];
  }
  if (json_truthy(tc.value("rope_scaling", json()))) {
    const json& s = tc["rope_scaling"];
    const bool plain = s.is_object() && s.value("rope_type", s.value("type", std::string())) == "default";
    if (!plain) refuse_config(where, "rope_scaling = " + shown_json(s) + ": not supported (only the default RoPE)");
  }
  json window = nullptr;
  if (type == "mistral") {
    window = tc.value("sliding_window", json());
    if (!window.is_null() && (!json_is_integer(window) || window.get<int64_t>() <= 0))
      refuse_config(where, "sliding_window = " + shown_json(window) + ": must be a positive integer or null");
  }
  if (type == "qwen2" && json_truthy(tc.value("use_sliding_window", json())))
    refuse_config(where,
                  "use_sliding_window = true: not supported (Qwen2's per-layer sliding window; the LLaVA-OneVision "
                  "models leave it off)");
  if (tc.value("hidden_act", json()) != json("silu"))
    refuse_config(where, "hidden_act = " + shown_json(tc.value("hidden_act", json())) + ": not supported (silu)");
  if (json_truthy(tc.value("attention_bias", json())) || json_truthy(tc.value("mlp_bias", json())))
    refuse_config(where, "attention_bias / mlp_bias: not supported");
  const int64_t hidden = positive_integer(tc, "hidden_size", where), heads = positive_integer(tc, "num_attention_heads", where);
  if (tc.value("num_key_value_heads", json()).is_null()) tc["num_key_value_heads"] = heads;
  const int64_t kv_heads = positive_integer(tc, "num_key_value_heads", where);
  const json given_head_dim = tc.value("head_dim", json());
  const bool has_head_dim = json_truthy(given_head_dim);
  if (has_head_dim && !json_is_integer(given_head_dim))
    refuse_config(where, "head_dim = " + shown_json(given_head_dim) + ": must be a positive integer");
  const int64_t head_dim = has_head_dim ? given_head_dim.get<int64_t>() : hidden / heads;
  if (heads % kv_heads != 0)
    refuse_config(where, "num_attention_heads " + std::to_string(heads) + " is not a multiple of num_key_value_heads " +
                             std::to_string(kv_heads));
  if (head_dim % 2 != 0 || (!has_head_dim && hidden % heads != 0))
    refuse_config(where, "hidden_size " + std::to_string(hidden) + " / num_attention_heads " + std::to_string(heads) +
                             " does not give an even head_dim");
  for (const char* key : {"rms_norm_eps", "rope_theta"})
    if (!tc.value(key, json()).is_number() || tc[key].get<double>() <= 0)
      refuse_config(where, std::string(key) + " = " + shown_json(tc.value(key, json())) + ": must be a positive number");
  return {{"hidden_size", hidden},
          {"num_layers", positive_integer(tc, "num_hidden_layers", where)},
          {"num_heads", heads},
          {"num_kv_heads", kv_heads},
          {"head_dim", head_dim},
          // head_dim + the LAR bias channel, padded to a multiple of 8 (model/kv_cache.h)
          {"cache_head_dim", (head_dim + 1 + 7) / 8 * 8},
          {"intermediate_size", positive_integer(tc, "intermediate_size", where)},
          {"vocab_size", positive_integer(tc, "vocab_size", where)},
          {"max_position_embeddings", positive_integer(tc, "max_position_embeddings", where)},
          {"rms_norm_eps", tc["rms_norm_eps"].get<double>()},
          {"rope_theta", tc["rope_theta"].get<double>()},
          {"model_type", type},
          {"sliding_window", window}};
}

HfTokenizer read_hf_tokenizer(const std::string& dir, const std::string& text_model_type, int64_t vocab_size) {
  HfTokenizer t;
  const bool byte_level = text_model_type == "qwen2";
  t.file = byte_level ? "tokenizer.json" : "tokenizer.model";
  const std::string path = dir + "/" + t.file;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    refuse_config(path, byte_level ? "not found (a " + text_model_type + " model's byte-level BPE tokenizer is required)"
                                   : "not found (the SentencePiece model is required)");
  const Tokenizer tokenizer(path);
  t.vocab_size = tokenizer.size();
  if (t.vocab_size > vocab_size)
    refuse_config(path, "the tokenizer has " + std::to_string(t.vocab_size) + " ids, more than the model's vocab_size " +
                            std::to_string(vocab_size));
  const json tc = read_json_file(dir + "/tokenizer_config.json", "tokenizer_config.json", false);
  if (byte_level) {  // no BOS; EOS is tokenizer_config.json's eos_token
    const std::string eos = token_content(tc.value("eos_token", json()));
    const auto id = eos.empty() ? std::nullopt : tokenizer.token_id(eos);
    t.eos_id = id ? *id : -1;
  } else {
    t.bos_id = tokenizer.bos_id();
    t.eos_id = tokenizer.eos_id();
  }
  // HF's added tokens, from every file that lists them (the first one to name a token wins)
  const std::string tc_path = dir + "/tokenizer_config.json";
  if (tc.contains("added_tokens_decoder")) {
    const json& decoder = tc["added_tokens_decoder"];
    if (!decoder.is_object()) refuse_config(tc_path, "added_tokens_decoder is not an object");
    for (const auto& [key, entry] : decoder.items()) {
      const std::string content = token_content(entry);
      const bool digits = !key.empty() && key.size() < 12 && std::all_of(key.begin(), key.end(), ::isdigit);
      if (content.empty() || !digits || !entry.is_object())
        refuse_config(tc_path, "added_tokens_decoder[\"" + key + "\"] has no content or is not keyed by an id");
      t.specials.emplace(content, std::stoll(key));
    }
  }
  const json added = read_json_file(dir + "/added_tokens.json", "added_tokens.json", false);
  for (const auto& [content, id] : added.items()) {
    if (!json_is_integer(id))
      refuse_config(dir + "/added_tokens.json", "\"" + content + "\" has id " + shown_json(id) + ", not an integer");
    t.specials.emplace(content, id.get<int64_t>());
  }
  std::error_code no;
  if (fs::exists(dir + "/tokenizer.json", no)) {
    const json tj = read_json_file(dir + "/tokenizer.json", "tokenizer.json", false);
    if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
      for (const json& e : tj["added_tokens"])
        if (e.is_object() && e.contains("content") && e["content"].is_string() && e.contains("id") && json_is_integer(e["id"]))
          t.specials.emplace(e["content"].get<std::string>(), e["id"].get<int64_t>());
  }
  for (const auto& [content, id] : t.specials)
    if (content != "<image>" && (id < 0 || id >= vocab_size))
      refuse_config(dir, "added token \"" + content + "\" has id " + std::to_string(id) + ", outside the model's vocab_size " +
                             std::to_string(vocab_size));
  t.specials.erase("<image>");
  // ChatML's markers where they are pieces of the SentencePiece model (Yi's are)
  if (!byte_level)
    for (const char* piece : {kImStart, kImEnd})
      if (!t.specials.count(piece))
        if (const auto id = tokenizer.token_id(piece)) t.specials.emplace(piece, *id);

  // the chat template: chat_template.jinja, chat_template.json, tokenizer_config.json (transformers' order)
  if (fs::exists(dir + "/chat_template.jinja", no)) {
    t.chat_template = read_input_file(dir + "/chat_template.jinja", "chat template", 16 << 20, ErrorCode::kBundle);
  } else {
    for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
      const json j = read_json_file(dir + "/" + name, name, false);
      if (j.contains("chat_template") && j["chat_template"].is_string()) {
        t.chat_template = j["chat_template"].get<std::string>();
        break;
      }
    }
  }
  const json gen = read_json_file(dir + "/generation_config.json", "generation_config.json", false);
  const json eos = gen.value("eos_token_id", json());
  const json ids = eos.is_array() ? eos : eos.is_null() ? json::array() : json::array({eos});
  for (const json& id : ids) {
    if (!json_is_integer(id) || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
      refuse_config(dir + "/generation_config.json", "eos_token_id = " + shown_json(eos) + ": not an id in the vocabulary");
    t.generation_eos.push_back(id.get<int64_t>());
  }
  return t;
}

std::string default_template_name(const HfTokenizer& tokenizer, const std::string& text_model_type) {
  const std::string& text = tokenizer.chat_template;
  std::string family;
  if (text.find(kImStart) != std::string::npos) family = "chatml";
  else if (text.find("[INST]") != std::string::npos) family = "mistral";
  else if (text.find("USER") != std::string::npos || text.find("ASSISTANT") != std::string::npos) family = "vicuna";
  else if (tokenizer.specials.count(kImStart)) family = "chatml";
  else family = text_model_type == "mistral" ? "mistral" : "vicuna";
  return family == "chatml" ? "chatml_direct" : family == "mistral" ? "mistral_instruct" : "vicuna_v1";
}

void set_tokens_and_prompt(json& manifest, const std::string& dir, const HfTokenizer& t, const std::string& template_name,
                           int64_t image_token_id, int64_t pad_id) {
  PromptTemplate tmpl;
  if (!find_prompt_template(template_name, &tmpl))
    refuse_config(dir, "no prompt template \"" + template_name + "\" in this build");
  if (is_chatml(tmpl.style)) {
    std::string missing;
    for (const char* piece : {kImStart, kImEnd})
      if (!t.specials.count(piece)) missing += (missing.empty() ? "" : ", ") + std::string(piece);
    if (!missing.empty())
      refuse_config(dir, "template " + template_name + " needs " + missing +
                             " as single tokens, but neither the tokenizer files nor " + t.file + " have them");
  }
  std::vector<int64_t> stops{t.eos_id};
  for (const int64_t id : t.generation_eos)
    if (id != t.eos_id) stops.push_back(id);
  if (is_chatml(tmpl.style) && std::find(stops.begin(), stops.end(), t.specials.at(kImEnd)) == stops.end())
    stops.push_back(t.specials.at(kImEnd));  // ChatML answers end with <|im_end|>
  std::vector<std::pair<int64_t, std::string>> by_id;
  for (const auto& [content, id] : t.specials) by_id.emplace_back(id, content);
  std::stable_sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  json added = json::array();
  for (const auto& [id, content] : by_id) added.push_back({{"content", content}, {"id", id}});
  manifest["tokens"] = {{"bos_id", t.bos_id},
                        {"eos_id", t.eos_id},
                        {"pad_id", pad_id},
                        {"image_token_id", image_token_id},
                        {"tokenizer_vocab_size", t.vocab_size},
                        {"stop_ids", stops},
                        {"added_tokens", added}};
  json prompt = {{"template", template_name}, {"system", tmpl.system}, {"image_placeholder", "<image>"}};
  if (tmpl.style == TemplateStyle::kVicunaV1)
    prompt.update({{"user_role", tmpl.user_role}, {"assistant_role", tmpl.assistant_role}, {"sep", tmpl.sep}});
  manifest["prompt"] = prompt;
  manifest["files"]["tokenizer"] = t.file;
}

}  // namespace era
