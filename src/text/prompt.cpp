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
};

std::string user_turn(const PromptTemplate& tmpl, const std::string& question, int num_images) {
  const int found = count_placeholders(question, tmpl.image_placeholder);
  if (found == 0) {
    std::string prefix;
    for (int i = 0; i < num_images; ++i) prefix += tmpl.image_placeholder + "\n";
    return prefix + question;
  }
  if (found != num_images) {
    throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + tmpl.image_placeholder +
                                        " placeholder(s) but " + std::to_string(num_images) + " image(s) were given");
  }
  return question;
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

std::string format_prompt(const PromptTemplate& tmpl, const std::string& question, int num_images) {
  const std::string user = user_turn(tmpl, question, num_images);
  switch (tmpl.style) {
    case TemplateStyle::kVicunaV1:
      return tmpl.system + tmpl.sep + tmpl.user_role + ": " + user + tmpl.sep + tmpl.assistant_role + ":";
    case TemplateStyle::kMistralInstruct: {
      // LLaVA's LLAMA_2 style wraps a non-empty system into the first user message.
      const std::string sys = tmpl.system.empty() ? "" : "<<SYS>>\n" + tmpl.system + "\n<</SYS>>\n\n";
      return "[INST] " + sys + user + " [/INST]";
    }
    case TemplateStyle::kChatmlDirect:
      return "<|im_start|>system\n" + tmpl.system + "<|im_end|><|im_start|>user\n" + user +
             "<|im_end|><|im_start|>assistant\n";
    case TemplateStyle::kChatml: {
      const std::string sys = tmpl.system.empty() ? "" : "<|im_start|>system\n" + tmpl.system + "<|im_end|>\n";
      return sys + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    }
  }
  throw Error(ErrorCode::kRuntime, "unknown prompt template style");
}

std::vector<int64_t> tokenize_with_images(const Tokenizer& tokenizer, const std::string& prompt,
                                          const std::string& placeholder, int64_t image_token_id,
                                          const std::vector<AddedToken>& added_tokens) {
  // Every piece that becomes one id by itself: the placeholder first, then the added tokens.
  std::vector<AddedToken> specials{{placeholder, image_token_id}};
  for (const auto& t : added_tokens) {
    if (!t.content.empty()) specials.push_back(t);
  }
  std::vector<int64_t> out{tokenizer.bos_id()};
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
