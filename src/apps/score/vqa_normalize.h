#pragma once
// The VQA answer normaliser LLaVA uses for VQAv2 uploads and TextVQA scoring: MMF's
// EvalAIAnswerProcessor (llava/eval/m4c_evaluator.py), spec §2. Each step is exposed so the
// VQAv2 scorer can apply the server's punctuation + digit/article steps on their own (§2.3).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace era::score {

// normalize(S) = process_digit_article(process_punctuation(whitespace(word_tokenize(S)))).
std::string vqa_normalize(std::string_view s);

// Step 1: lowercase; delete ',' and '?'; "'s" -> " 's"; strip.
std::string vqa_word_tokenize(std::string_view s);
// Step 3: the 21-character punctuation rule, then deletion of the first 32 periods that are not
// followed by a digit (the `count=re.UNICODE` quirk).
std::string vqa_process_punctuation(std::string_view s);
// Step 4: lowercase, split, number words none..ten -> digits, drop a/an/the, contractions table.
std::string vqa_process_digit_article(std::string_view s);

// The MMF contractions table (120 entries, ASCII apostrophes, keys as written there: the
// capitalised keys can never match lowercased text).
const std::vector<std::pair<std::string, std::string>>& vqa_contractions();
// The 21 punctuation characters, in MMF's order.
const std::string& vqa_punctuation();

}  // namespace era::score
