#include "text/prompt.h"

#include "era/error.h"

namespace era {
namespace {

struct TemplateEntry {
  const char* name;
  TemplateStyle style;
  const char* default_system;
};

// The one table of templates (prompt.h describes each). The vicuna_v1 system text is the struct's
// default; chatml_direct's is conv_chatml_direct's.
const TemplateEntry kTemplates[] = {
    {"vicuna_v1", TemplateStyle::kVicunaV1, nullptr},
    {"mistral_instruct", TemplateStyle::kMistralInstruct, ""},
    {"chatml_direct", TemplateStyle::kChatmlDirect, "Answer the questions."},
    {"chatml", TemplateStyle::kChatml, ""},
    // LLaVA's conv_qwen_1_5 (LLaVA-OneVision / LLaVA-Video evaluation): ChatML with a system turn
    {"qwen_1_5", TemplateStyle::kChatml, "You are a helpful assistant."},
};

// One kind's placeholders (images or videos) over all user texts of a conversation: where none
// are written, one "PLACEHOLDER\n" per item goes in front of the first user text (LLaVA puts a
// conversation's image in its first turn); otherwise their number must match.
void place_items(std::vector<std::string>& users, const std::string& placeholder, int count, const char* what) {
  if (placeholder.empty() && count == 0) return;  // a template without that kind of item
  int found = 0;
  for (const auto& u : users) found += count_placeholders(u, placeholder);
  if (found == 0) {
    std::string prefix;
    for (int i = 0; i < count; ++i) prefix += placeholder + "\n";
    users.front() = prefix + users.front();
  } else if (found != count) {
    throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + placeholder + " placeholder(s) but " +
                                        std::to_string(count) + " " + what + "(s) were given");
  }
}

}  // namespace

std::vector<std::string> known_prompt_templates() {
  std::vector<std::string> names;
  for (const auto& t : kTemplates) names.emplace_back(t.name);
  return names;
}

bool find_prompt_template(const std::string& name, PromptTemplate* out) {
  for (const auto& t : kTemplates) {
    if (name != t.name) continue;
    PromptTemplate tmpl;
    tmpl.name = t.name;
    tmpl.style = t.style;
    if (t.default_system != nullptr) tmpl.system = t.default_system;
    *out = tmpl;
    return true;
  }
  return false;
}

int count_placeholders(const std::string& text, const std::string& placeholder) {
  int n = 0;
  for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at + placeholder.size())) ++n;
  return n;
}

std::string format_prompt(const PromptTemplate& tmpl, const std::string& question, int num_images, int num_videos) {
  return format_conversation(tmpl, {}, question, num_images, num_videos);
}

std::string format_conversation(const PromptTemplate& tmpl, const std::vector<Turn>& history, const std::string& question,
                                int num_images, int num_videos) {
  std::vector<std::string> users;
  for (const auto& turn : history) users.push_back(turn.user);
  users.push_back(question);
  // videos first, so that images placed in front come before them: "<image>\n<video>\nQ"
  place_items(users, tmpl.video_placeholder, num_videos, "video");
  place_items(users, tmpl.image_placeholder, num_images, "image");
  const auto answer = [&](size_t i) -> const std::string& { return history[i].assistant; };
  const size_t last = users.size() - 1;
  std::string out;
  switch (tmpl.style) {
    case TemplateStyle::kVicunaV1:  // separator style TWO: sep after a user turn, "</s>" after an answer
      out = tmpl.system + tmpl.sep;
      for (size_t i = 0; i < last; ++i) {
        out += tmpl.user_role + ": " + users[i] + tmpl.sep + tmpl.assistant_role + ": " + answer(i) + "</s>";
      }
      return out + tmpl.user_role + ": " + users[last] + tmpl.sep + tmpl.assistant_role + ":";
    case TemplateStyle::kMistralInstruct: {
      // LLAMA_2 style: a non-empty system is wrapped into the first user message; every exchange
      // after the first starts with "<s>" (the leading one is stripped, BOS is added anyway).
      const std::string sys = tmpl.system.empty() ? "" : "<<SYS>>\n" + tmpl.system + "\n<</SYS>>\n\n";
      for (size_t i = 0; i <= last; ++i) {
        out += (i == 0 ? "" : "<s>") + std::string("[INST] ") + (i == 0 ? sys : "") + users[i] + " [/INST]";
        if (i < last) out += " " + answer(i) + " </s>";
      }
      return out;
    }
    case TemplateStyle::kChatmlDirect:  // MPT style: no newline after <|im_end|>
    case TemplateStyle::kChatml: {
      const bool direct = tmpl.style == TemplateStyle::kChatmlDirect;
      const std::string end = direct ? "<|im_end|>" : "<|im_end|>\n";
      if (direct || !tmpl.system.empty()) out = "<|im_start|>system\n" + tmpl.system + end;
      for (size_t i = 0; i <= last; ++i) {
        out += "<|im_start|>user\n" + users[i] + end + "<|im_start|>assistant\n";
        if (i < last) out += answer(i) + end;
      }
      return out;
    }
  }
  throw Error(ErrorCode::kRuntime, "unknown prompt template style");
}

std::vector<int64_t> tokenize_with_images(const Tokenizer& tokenizer, const std::string& prompt, const std::string& placeholder,
                                          int64_t image_token_id, const std::vector<AddedToken>& added_tokens) {
  // Every piece that becomes one id by itself: the placeholder first, then the added tokens.
  std::vector<AddedToken> specials{{placeholder, image_token_id}};
  for (const auto& t : added_tokens) {
    if (!t.content.empty()) specials.push_back(t);
  }
  std::vector<int64_t> out;
  if (tokenizer.bos_id() >= 0) out.push_back(tokenizer.bos_id());  // Qwen2's byte-level BPE has none
  size_t start = 0;
  while (true) {
    size_t best_at = std::string::npos;
    const AddedToken* best = nullptr;
    for (const auto& s : specials) {
      const size_t at = prompt.find(s.content, start);
      if (at == std::string::npos) continue;
      if (best == nullptr || at < best_at || (at == best_at && s.content.size() > best->content.size())) {
        best_at = at;
        best = &s;
      }
    }
    const std::string chunk = prompt.substr(start, best == nullptr ? std::string::npos : best_at - start);
    if (!chunk.empty()) {
      const auto ids = tokenizer.encode(chunk);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (best == nullptr) break;
    out.push_back(best->id);
    start = best_at + best->content.size();
  }
  return out;
}

}  // namespace era
