#include "apps/score/vqa_normalize.h"

#include <unordered_map>
#include <unordered_set>

#include "apps/score/text_util.h"

namespace era::score {
namespace {

// Python's re `\d`-followed test at byte offset i (the code point starting there).
bool digit_at(std::string_view s, size_t i) { return i < s.size() && py_isdigit_re(decode_utf8(s, i).value); }

// re.search(r"(?<=\d)(\,)+(?=\d)", s): a digit, one or more commas, a digit.
bool has_digit_comma_digit(std::string_view s) {
  bool prev_digit = false;
  for (size_t i = 0; i < s.size();) {
    const auto cp = decode_utf8(s, i);
    if (cp.value == ',' && prev_digit) {
      size_t j = i;
      while (j < s.size() && s[j] == ',') ++j;
      if (digit_at(s, j)) return true;
    }
    prev_digit = py_isdigit_re(cp.value) && !(cp.length == 1 && cp.value >= 0x80);
    i += cp.length;
  }
  return false;
}

const std::unordered_map<std::string, std::string>& contraction_map() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<std::string, std::string>();
    for (const auto& [k, v] : vqa_contractions()) (*m)[k] = v;
    return m;
  }();
  return *map;
}

}  // namespace

const std::string& vqa_punctuation() {
  static const std::string p = ";/[]\"{}()=+\\_-><@`,?!";
  return p;
}

const std::vector<std::pair<std::string, std::string>>& vqa_contractions() {
  // Transcribed entry by entry from MMF's EvalAIAnswerProcessor.CONTRACTIONS (LLaVA's copy).
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"aint", "ain't"},
      {"arent", "aren't"},
      {"cant", "can't"},
      {"couldve", "could've"},
      {"couldnt", "couldn't"},
      {"couldn'tve", "couldn't've"},
      {"couldnt've", "couldn't've"},
      {"didnt", "didn't"},
      {"doesnt", "doesn't"},
      {"dont", "don't"},
      {"hadnt", "hadn't"},
      {"hadnt've", "hadn't've"},
      {"hadn'tve", "hadn't've"},
      {"hasnt", "hasn't"},
      {"havent", "haven't"},
      {"hed", "he'd"},
      {"hed've", "he'd've"},
      {"he'dve", "he'd've"},
      {"hes", "he's"},
      {"howd", "how'd"},
      {"howll", "how'll"},
      {"hows", "how's"},
      {"Id've", "I'd've"},
      {"I'dve", "I'd've"},
      {"Im", "I'm"},
      {"Ive", "I've"},
      {"isnt", "isn't"},
      {"itd", "it'd"},
      {"itd've", "it'd've"},
      {"it'dve", "it'd've"},
      {"itll", "it'll"},
      {"let's", "let's"},
      {"maam", "ma'am"},
      {"mightnt", "mightn't"},
      {"mightnt've", "mightn't've"},
      {"mightn'tve", "mightn't've"},
      {"mightve", "might've"},
      {"mustnt", "mustn't"},
      {"mustve", "must've"},
      {"neednt", "needn't"},
      {"notve", "not've"},
      {"oclock", "o'clock"},
      {"oughtnt", "oughtn't"},
      {"ow's'at", "'ow's'at"},
      {"'ows'at", "'ow's'at"},
      {"'ow'sat", "'ow's'at"},
      {"shant", "shan't"},
      {"shed've", "she'd've"},
      {"she'dve", "she'd've"},
      {"she's", "she's"},
      {"shouldve", "should've"},
      {"shouldnt", "shouldn't"},
      {"shouldnt've", "shouldn't've"},
      {"shouldn'tve", "shouldn't've"},
      {"somebody'd", "somebodyd"},
      {"somebodyd've", "somebody'd've"},
      {"somebody'dve", "somebody'd've"},
      {"somebodyll", "somebody'll"},
      {"somebodys", "somebody's"},
      {"someoned", "someone'd"},
      {"someoned've", "someone'd've"},
      {"someone'dve", "someone'd've"},
      {"someonell", "someone'll"},
      {"someones", "someone's"},
      {"somethingd", "something'd"},
      {"somethingd've", "something'd've"},
      {"something'dve", "something'd've"},
      {"somethingll", "something'll"},
      {"thats", "that's"},
      {"thered", "there'd"},
      {"thered've", "there'd've"},
      {"there'dve", "there'd've"},
      {"therere", "there're"},
      {"theres", "there's"},
      {"theyd", "they'd"},
      {"theyd've", "they'd've"},
      {"they'dve", "they'd've"},
      {"theyll", "they'll"},
      {"theyre", "they're"},
      {"theyve", "they've"},
      {"twas", "'twas"},
      {"wasnt", "wasn't"},
      {"wed've", "we'd've"},
      {"we'dve", "we'd've"},
      {"weve", "we've"},
      {"werent", "weren't"},
      {"whatll", "what'll"},
      {"whatre", "what're"},
      {"whats", "what's"},
      {"whatve", "what've"},
      {"whens", "when's"},
      {"whered", "where'd"},
      {"wheres", "where's"},
      {"whereve", "where've"},
      {"whod", "who'd"},
      {"whod've", "who'd've"},
      {"who'dve", "who'd've"},
      {"wholl", "who'll"},
      {"whos", "who's"},
      {"whove", "who've"},
      {"whyll", "why'll"},
      {"whyre", "why're"},
      {"whys", "why's"},
      {"wont", "won't"},
      {"wouldve", "would've"},
      {"wouldnt", "wouldn't"},
      {"wouldnt've", "wouldn't've"},
      {"wouldn'tve", "wouldn't've"},
      {"yall", "y'all"},
      {"yall'll", "y'all'll"},
      {"y'allll", "y'all'll"},
      {"yall'd've", "y'all'd've"},
      {"y'alld've", "y'all'd've"},
      {"y'all'dve", "y'all'd've"},
      {"youd", "you'd"},
      {"youd've", "you'd've"},
      {"you'dve", "you'd've"},
      {"youll", "you'll"},
      {"youre", "you're"},
      {"youve", "you've"},
  };
  return table;
}

std::string vqa_word_tokenize(std::string_view s) {
  std::string t = py_lower(s);
  t = replace_all(t, ",", "");
  t = replace_all(t, "?", "");
  t = replace_all(t, "'s", " 's");
  return py_strip(t);
}

std::string vqa_process_punctuation(std::string_view in) {
  std::string out(in);
  const bool digit_comma = has_digit_comma_digit(in);
  for (const char p : vqa_punctuation()) {
    const std::string ps(1, p);
    const bool adjacent_space = contains(in, ps + " ") || contains(in, " " + ps);
    out = replace_all(out, ps, (adjacent_space || digit_comma) ? "" : " ");
  }
  // PERIOD_STRIP.sub("", out, 32): the first 32 periods not followed by a \d digit go.
  std::string result;
  result.reserve(out.size());
  int removed = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '.' && removed < 32 && !digit_at(out, i + 1)) {
      ++removed;
      continue;
    }
    result += out[i];
  }
  return result;
}

std::string vqa_process_digit_article(std::string_view in) {
  static const std::unordered_map<std::string, std::string> numbers = {
      {"none", "0"}, {"zero", "0"}, {"one", "1"},   {"two", "2"},   {"three", "3"}, {"four", "4"},
      {"five", "5"}, {"six", "6"},  {"seven", "7"}, {"eight", "8"}, {"nine", "9"},  {"ten", "10"}};
  static const std::unordered_set<std::string> articles = {"a", "an", "the"};
  std::string out;
  for (std::string word : py_split(py_lower(in))) {
    if (const auto n = numbers.find(word); n != numbers.end()) word = n->second;
    if (articles.count(word)) continue;
    if (const auto c = contraction_map().find(word); c != contraction_map().end()) word = c->second;
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

std::string vqa_normalize(std::string_view s) {
  std::string t = vqa_word_tokenize(s);
  t = replace_all(t, "\n", " ");
  t = replace_all(t, "\t", " ");
  t = py_strip(t);
  t = vqa_process_punctuation(t);
  return vqa_process_digit_article(t);
}

}  // namespace era::score
