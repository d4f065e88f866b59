#include "text/prompt.h"

#include "era/error.h"

namespace era {

int count_placeholders(const std::string& text, const std::string& placeholder) {
  int n = 0;
  for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at + placeholder.size())) ++n;
  return n;
}

std::string format_prompt(const PromptTemplate& tmpl, const std::string& question, int num_images) {
  const int found = count_placeholders(question, tmpl.image_placeholder);
  std::string user = question;
  if (found == 0) {
    std::string prefix;
    for (int i = 0; i < num_images; ++i) prefix += tmpl.image_placeholder + "\n";
    user = prefix + question;
  } else if (found != num_images) {
    throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + tmpl.image_placeholder +
                                        " placeholder(s) but " + std::to_string(num_images) + " image(s) were given");
  }
  return tmpl.system + tmpl.sep + tmpl.user_role + ": " + user + tmpl.sep + tmpl.assistant_role + ":";
}

std::vector<int64_t> tokenize_with_images(const Tokenizer& tokenizer, const std::string& prompt,
                                          const std::string& placeholder, int64_t image_token_id) {
  std::vector<int64_t> out{tokenizer.bos_id()};
  size_t start = 0;
  while (true) {
    const size_t at = prompt.find(placeholder, start);
    const std::string chunk = prompt.substr(start, at == std::string::npos ? std::string::npos : at - start);
    const auto ids = tokenizer.encode(chunk);
    out.insert(out.end(), ids.begin(), ids.end());
    if (at == std::string::npos) break;
    out.push_back(image_token_id);
    start = at + placeholder.size();
  }
  return out;
}

}  // namespace era
