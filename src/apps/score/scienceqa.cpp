#include "apps/score/scienceqa.h"

#include <map>

#include "apps/score/json_read.h"
#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {
namespace {

const std::string kOptions = "ABCDE";
const std::string kPattern = "The answer is ";

}  // namespace

SqaParse sqa_parse(const std::string& text, size_t num_choices) {
  SqaParse p;
  p.letter = "FAILED";
  if (text.size() == 1 && kOptions.find(text[0]) != std::string::npos) {
    p.letter = text;
  } else if (py_len(text) >= 3 && kOptions.find(text[0]) != std::string::npos && text.compare(1, 2, ". ") == 0) {
    p.letter = text.substr(0, 1);
  } else {
    // re.findall, non-overlapping, left to right.
    std::vector<char> matches;
    size_t pos = 0;
    while ((pos = text.find(kPattern, pos)) != std::string::npos) {
      const size_t letter = pos + kPattern.size();
      if (letter + 1 < text.size() && text[letter] >= 'A' && text[letter] <= 'Z' && text[letter + 1] != '\n') {
        matches.push_back(text[letter]);
        pos = letter + 1 + decode_utf8(text, letter + 1).length;
      } else {
        ++pos;
      }
    }
    if (matches.size() == 1) p.letter = std::string(1, matches[0]);
  }
  if (p.letter != "FAILED") {
    const size_t i = kOptions.find(p.letter[0]);
    if (p.letter.size() == 1 && i != std::string::npos && i < num_choices) p.index = static_cast<int>(i);
  }
  return p;
}

std::unordered_map<std::string, SqaProblem> read_sqa_problems(const std::string& path, const std::string& split) {
  const auto keep = [](int depth, const std::string& key) {
    return depth == 1 || (depth == 2 && (key == "answer" || key == "choices" || key == "image" || key == "split"));
  };
  const auto j = detail::read_json_file(path, "annotations", keep);
  if (!j.is_object())
    throw Error(ErrorCode::kInvalidArgument,
                "annotations " + path + ": expected ScienceQA's problems.json ({problem_id: {\"answer\", \"choices\", ...}})");
  std::unordered_map<std::string, SqaProblem> out;
  for (const auto& [pid, p] : j.items()) {
    const std::string where = "annotations " + path + " problem " + pid;
    if (!p.is_object() || !p.contains("answer") || !p["answer"].is_number_integer() || !p.contains("choices") ||
        !p["choices"].is_array())
      throw Error(ErrorCode::kInvalidArgument, where + ": needs an integer \"answer\" and a \"choices\" list");
    if (p.contains("split") && p["split"].is_string() && p["split"].get<std::string>() != split) continue;
    SqaProblem s;
    s.answer = p["answer"].get<int>();
    s.num_choices = p["choices"].size();
    s.has_image =
        p.contains("image") && !p["image"].is_null() && !(p["image"].is_string() && p["image"].get<std::string>().empty());
    out.emplace(pid, s);
  }
  if (out.empty()) throw Error(ErrorCode::kInvalidArgument, "annotations " + path + ": no problems in split \"" + split + "\"");
  return out;
}

SqaResult score_sqa(const AnswerFile& answers, const std::unordered_map<std::string, SqaProblem>& problems) {
  SqaResult r;
  const LatestAnswers latest = latest_answers(answers, [&](const Answer& a) {
    if (!problems.count(a.question_id)) return false;
    if (!a.has_prompt)
      throw Error(ErrorCode::kInvalidArgument, "answers " + answers.path + " line " + std::to_string(a.line) +
                                                   ": ScienceQA needs the prompt (\"<image>\" in it marks the IMG subset)");
    return true;
  });
  r.error_records = latest.error_records;
  r.unmatched = latest.unmatched;
  r.duplicates = latest.duplicates;
  for (const auto& pid : latest.order) {
    const SqaProblem& prob = problems.at(pid);
    const Answer& a = *latest.by_id.at(pid);
    const SqaParse p = sqa_parse(a.text, prob.num_choices);
    const bool correct = p.index == prob.answer;
    const bool img = contains(a.prompt, "<image>");
    ++r.total;
    r.correct += correct;
    r.failed_parses += p.letter == "FAILED";
    if (img) {
      ++r.img_total;
      r.img_correct += correct;
    }
  }
  r.missing = problems.size() - latest.by_id.size();
  const auto pct = [](size_t c, size_t n) { return n ? static_cast<double>(c) / static_cast<double>(n) * 100.0 : 0.0; };
  r.accuracy = pct(r.correct, r.total);
  r.img_accuracy = pct(r.img_correct, r.img_total);
  return r;
}

}  // namespace era::score
