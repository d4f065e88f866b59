#include "apps/score/vqa_accuracy.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "apps/score/json_read.h"
#include "apps/score/text_util.h"
#include "apps/score/vqa_normalize.h"
#include "era/error.h"

namespace era::score {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

detail::KeyFilter keep_keys(std::set<std::string> keys) {
  return [keys = std::move(keys)](int, const std::string& key) { return keys.count(key) > 0; };
}

double mean_percent(const std::vector<double>& xs) {
  double sum = 0;  // Python's sum(): left to right
  for (const double x : xs) sum += x;
  return xs.empty() ? 0.0 : 100.0 * (sum / static_cast<double>(xs.size()));
}

std::string whitespace_cleanup(const std::string& s) { return py_strip(replace_all(replace_all(s, "\n", " "), "\t", " ")); }

}  // namespace

double vqa_accuracy(const std::string& pred, const std::vector<std::string>& gt) {
  if (gt.empty()) return 0.0;
  const auto k = static_cast<size_t>(std::count(gt.begin(), gt.end(), pred));
  double sum = 0;
  for (const auto& g : gt) {
    const size_t others = k - (g == pred ? 1 : 0);  // matches among the other n-1 answers
    sum += std::min(1.0, static_cast<double>(others) / 3);
  }
  return sum / static_cast<double>(gt.size());
}

// ---- TextVQA ---------------------------------------------------------------------------------

std::vector<TextVqaAnnotation> read_textvqa_annotations(const std::string& path) {
  const json j = detail::read_json_file(path, "annotations", keep_keys({"data", "image_id", "question", "answers"}));
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    fail("annotations " + path + ": expected TextVQA's {\"data\": [...]} (TextVQA_0.5.1_val.json)");
  std::vector<TextVqaAnnotation> out;
  for (size_t i = 0; i < j["data"].size(); ++i) {
    const json& d = j["data"][i];
    const std::string where = "annotations " + path + " data[" + std::to_string(i) + "]";
    if (!d.is_object() || !d.contains("image_id") || !d.contains("question") || !d.contains("answers") ||
        !d["question"].is_string() || !d["answers"].is_array())
      fail(where + ": needs image_id, question and answers");
    TextVqaAnnotation a;
    a.image_id = detail::id_string(d["image_id"], where + " image_id");
    a.question = d["question"].get<std::string>();
    for (const auto& ans : d["answers"]) {
      if (!ans.is_string()) fail(where + ": answers must be strings");
      a.answers.push_back(ans.get<std::string>());
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string textvqa_question_from_prompt(const std::string& prompt) {
  std::string question;
  const auto lines = py_split(prompt, "\n");
  if (prompt.rfind("OCR tokens: ", 0) == 0) {
    const size_t q = prompt.find("Question: ");
    const size_t end = q == std::string::npos ? q : prompt.find(" Short answer:", q + 10);
    if (end == std::string::npos) fail("no \"Question: ... Short answer:\" in an \"OCR tokens:\" prompt");
    question = prompt.substr(q + 10, end - q - 10);
  } else if (contains(prompt, "Reference OCR token: ") && lines.size() == 3) {
    question = prompt.rfind("Reference OCR token:", 0) == 0 ? lines[1] : lines[0];
  } else if (lines.size() == 2) {
    question = lines[0];
  } else {
    fail("cannot find the question in the prompt (expected LLaVA's 2-line or 3-line TextVQA prompt)");
  }
  return py_lower(question);
}

VqaResult score_textvqa(const AnswerFile& answers, const std::vector<TextVqaAnnotation>& annotations) {
  std::map<std::pair<std::string, std::string>, const TextVqaAnnotation*> by_key;
  for (const auto& a : annotations) by_key[{a.image_id, py_lower(a.question)}] = &a;  // later ones win
  std::map<const TextVqaAnnotation*, std::vector<std::string>> normalised_gt;
  std::set<const TextVqaAnnotation*> seen;
  VqaResult r;
  for (const auto& ans : answers.records) {
    if (ans.is_error) {
      ++r.error_records;
      continue;
    }
    const std::string where = "answers " + answers.path + " line " + std::to_string(ans.line);
    if (!ans.has_prompt) fail(where + ": TextVQA needs the prompt (the question is read from it)");
    std::string question;
    try {
      question = textvqa_question_from_prompt(ans.prompt);
    } catch (const Error& e) {
      fail(where + ": " + e.what());
    }
    const auto it = by_key.find({ans.question_id, question});
    if (it == by_key.end()) {
      ++r.unmatched;
      continue;
    }
    const TextVqaAnnotation* gt = it->second;
    auto norm = normalised_gt.find(gt);
    if (norm == normalised_gt.end()) {
      if (gt->answers.size() != 10)
        fail("annotation for image " + gt->image_id + " \"" + gt->question + "\" has " + std::to_string(gt->answers.size()) +
             " answers; TextVQA needs exactly 10");
      std::vector<std::string> n;
      for (const auto& g : gt->answers) n.push_back(vqa_normalize(g));
      norm = normalised_gt.emplace(gt, std::move(n)).first;
    }
    if (contains(ans.prompt, "Reference OCR token:") || ans.prompt.rfind("OCR tokens: ", 0) == 0) ++r.ocr_prompts;
    if (!seen.insert(gt).second) ++r.duplicates;  // scored again, as LLaVA's list-based evaluator does
    r.per_question.push_back(vqa_accuracy(vqa_normalize(ans.text), norm->second));
  }
  r.scored = r.per_question.size();
  r.accuracy = mean_percent(r.per_question);
  r.missing = by_key.size() - seen.size();
  return r;
}

// ---- VQAv2 -----------------------------------------------------------------------------------

std::unordered_map<std::string, VqaV2Annotation> read_vqav2_annotations(const std::string& path) {
  const json j =
      detail::read_json_file(path, "annotations", keep_keys({"annotations", "question_id", "answers", "answer", "answer_type"}));
  if (!j.is_object() || !j.contains("annotations") || !j["annotations"].is_array())
    fail("annotations " + path + ": expected VQA's {\"annotations\": [...]} (v2_mscoco_val2014_annotations.json)");
  std::unordered_map<std::string, VqaV2Annotation> out;
  for (size_t i = 0; i < j["annotations"].size(); ++i) {
    const json& d = j["annotations"][i];
    const std::string where = "annotations " + path + " annotations[" + std::to_string(i) + "]";
    if (!d.is_object() || !d.contains("question_id") || !d.contains("answers") || !d["answers"].is_array())
      fail(where + ": needs question_id and answers");
    VqaV2Annotation a;
    for (const auto& ans : d["answers"]) {
      if (!ans.is_object() || !ans.contains("answer") || !ans["answer"].is_string())
        fail(where + ": each answer needs a string \"answer\"");
      a.answers.push_back(ans["answer"].get<std::string>());
    }
    if (d.contains("answer_type") && d["answer_type"].is_string()) a.answer_type = d["answer_type"].get<std::string>();
    out[detail::id_string(d["question_id"], where + " question_id")] = std::move(a);
  }
  return out;
}

double vqav2_accuracy(const std::string& prediction, const std::vector<std::string>& gt) {
  const std::string uploaded = vqa_normalize(prediction);
  const std::string res = vqa_process_digit_article(vqa_process_punctuation(whitespace_cleanup(uploaded)));
  const std::set<std::string> distinct(gt.begin(), gt.end());
  if (distinct.size() <= 1) return vqa_accuracy(res, gt);
  std::vector<std::string> processed;
  for (const auto& g : gt) processed.push_back(vqa_process_punctuation(g));
  return vqa_accuracy(res, processed);
}

VqaResult score_vqav2(const AnswerFile& answers, const std::unordered_map<std::string, VqaV2Annotation>& annotations) {
  VqaResult r;
  const LatestAnswers latest = latest_answers(answers, [&](const Answer& a) { return annotations.count(a.question_id) > 0; });
  r.error_records = latest.error_records;
  r.unmatched = latest.unmatched;
  r.duplicates = latest.duplicates;
  std::map<std::string, std::vector<double>> by_type;
  for (const auto& qid : latest.order) {
    const auto& gt = annotations.at(qid);
    const double acc = vqav2_accuracy(latest.by_id.at(qid)->text, gt.answers);
    r.per_question.push_back(acc);
    if (!gt.answer_type.empty()) by_type[gt.answer_type].push_back(acc);
  }
  r.scored = r.per_question.size();
  r.accuracy = mean_percent(r.per_question);
  r.missing = annotations.size() - latest.by_id.size();
  for (const auto& [name, accs] : by_type) r.by_type.push_back({name, accs.size(), mean_percent(accs)});
  return r;
}

std::vector<std::string> read_question_ids(const std::string& path) {
  std::istringstream in(read_text_file(path, "questions"));
  std::vector<std::string> ids;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "questions " + path + " line " + std::to_string(number);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception&) {
      fail(where + ": not valid JSON");
    }
    if (!j.is_object() || !j.contains("question_id")) fail(where + ": no question_id");
    ids.push_back(detail::id_string(j["question_id"], where + ": question_id"));
  }
  return ids;
}

void write_vqav2_upload(const std::string& path, const AnswerFile& answers, const std::vector<std::string>* all_question_ids) {
  auto id_json = [](const std::string& id) -> json {
    const bool numeric = !id.empty() && id.find_first_not_of("-0123456789") == std::string::npos;
    return numeric ? json(std::stoll(id)) : json(id);
  };
  std::map<std::string, std::string> by_id;  // the last answer of each question wins (a dict)
  std::vector<std::string> order;
  for (const auto& a : answers.records) {
    if (a.is_error) continue;
    if (by_id.emplace(a.question_id, a.text).second) order.push_back(a.question_id);
    else by_id[a.question_id] = a.text;
  }
  json out = json::array();
  const std::vector<std::string>& ids = all_question_ids ? *all_question_ids : order;
  for (const auto& id : ids) {
    const auto it = by_id.find(id);
    out.push_back({{"question_id", id_json(id)}, {"answer", it == by_id.end() ? "" : vqa_normalize(it->second)}});
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("--upload " + path + ": cannot write");
  f << out.dump() << "\n";
  if (!f) fail("--upload " + path + ": write failed");
}

}  // namespace era::score
