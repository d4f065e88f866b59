#include "apps/score/video_choice.h"

#include <fstream>

#include "apps/score/json_read.h"
#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

const std::vector<std::string>& prefixes(VideoChoiceBenchmark b) {
  // Video-MME's list as lmms-eval runs it: two pairs lack a comma and are one string each.
  static const std::vector<std::string> videomme = {"The best answer is",
                                                    "The correct answer is",
                                                    "The answer is",
                                                    "The answer",
                                                    "The best option isThe correct option is",
                                                    "Best answer:Best option:"};
  static const std::vector<std::string> longvideobench = {"The best answer is", "The correct answer is", "The answer is",
                                                          "The answer",         "The best option is",    "The correct option is",
                                                          "Best answer:",       "Best option:"};
  return b == VideoChoiceBenchmark::kVideoMme ? videomme : longvideobench;
}

std::string letters(VideoChoiceBenchmark b) { return b == VideoChoiceBenchmark::kVideoMme ? "ABCD" : "ABCDE"; }

std::string benchmark_name(VideoChoiceBenchmark b) {
  switch (b) {
    case VideoChoiceBenchmark::kVideoMme: return "Video-MME";
    case VideoChoiceBenchmark::kLongVideoBench: return "LongVideoBench";
    case VideoChoiceBenchmark::kMvBench: return "MVBench";
  }
  return "";
}

bool is_a_to_e(char32_t c) { return (c >= 'A' && c <= 'E') || (c >= 'a' && c <= 'e'); }
char upper(char32_t c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c); }

// str.strip(c) for one ASCII character.
std::string strip_char(const std::string& s, char c) {
  const size_t begin = s.find_first_not_of(c);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(c) - begin + 1);
}

// mcq_acc's processPunctuation: each of its characters is deleted when the input has it next to a
// space (or has digit,digit anywhere), else replaced by a space; then periodStrip.sub("", text,
// re.UNICODE) deletes "." not followed by a digit, at most 32 of them (re.UNICODE == 32 lands in
// sub()'s count). Its lookbehind "(?!<=\d)" is a lookahead for "<=" and a digit, never true
// before a ".".
std::string mvbench_punctuation(const std::string& in) {
  static const char punct[] = {';',  '/', '[', ']', '"', '{', '}', '(', ')', '=', '+',
                               '\\', '_', '-', '>', '<', '@', '`', ',', '?', '!'};
  bool comma_between_digits = false;  // re.search("(\d)(\,)(\d)", inText)
  char32_t before = 0;
  for (size_t i = 0; i < in.size();) {
    const CodePoint cp = decode_utf8(in, i);
    if (cp.value == ',' && py_isdigit_re(before) && i + 1 < in.size() && py_isdigit_re(decode_utf8(in, i + 1).value))
      comma_between_digits = true;
    before = cp.value;
    i += cp.length;
  }
  std::string out = in;
  for (const char p : punct) {
    const std::string ch(1, p);
    const bool drop = contains(in, ch + " ") || contains(in, " " + ch) || comma_between_digits;
    out = replace_all(out, ch, drop ? "" : " ");
  }
  std::string stripped;
  int removed = 0;
  for (size_t i = 0; i < out.size();) {
    const CodePoint cp = decode_utf8(out, i);
    const bool digit_next = i + cp.length < out.size() && py_isdigit_re(decode_utf8(out, i + cp.length).value);
    if (cp.value == '.' && !digit_next && removed < 32) {
      ++removed;
    } else {
      stripped.append(out, i, cp.length);
    }
    i += cp.length;
  }
  return stripped;
}

// mcq_acc's process(): an option letter "A"-"E", or the cleaned text when it finds none.
std::string mvbench_process(const std::string& answer) {
  // re.match(r"^([A-E])\.\s*(.+)$", answer.strip(), re.IGNORECASE): "." never matches "\n", and
  // the stripped text ends in a non-space, so it matches when the text after "X." and its leading
  // whitespace is non-empty and has no newline.
  const std::string s = py_strip(answer);
  if (s.size() >= 3 && is_a_to_e(static_cast<unsigned char>(s[0])) && s[1] == '.') {
    size_t i = 2;
    while (i < s.size()) {
      const CodePoint cp = decode_utf8(s, i);
      if (!py_isspace(cp.value) || (cp.length == 1 && cp.value >= 0x80)) break;
      i += cp.length;
    }
    if (i < s.size() && s.find('\n', i) == std::string::npos) return std::string(1, upper(static_cast<unsigned char>(s[0])));
  }
  std::string t = replace_all(replace_all(answer, "\n", " "), "\t", " ");
  t = mvbench_punctuation(py_strip(t));
  for (const char c : {'\'', '"', ')', '('}) t = strip_char(t, c);
  t = py_lower(py_strip(t));
  // re.search(r"\b([A-E])\b", t, re.IGNORECASE): the first A-E with no word character on either side.
  bool word_before = false;
  for (size_t i = 0; i < t.size();) {
    const CodePoint cp = decode_utf8(t, i);
    if (is_a_to_e(cp.value) && !word_before && (i + 1 == t.size() || !py_isword_re(decode_utf8(t, i + 1).value)))
      return std::string(1, upper(cp.value));
    word_before = py_isword_re(cp.value);
    i += cp.length;
  }
  return t;
}

bool is_option_letter(const std::string& read, VideoChoiceBenchmark benchmark) {
  return read.size() == 1 && letters(benchmark).find(read[0]) != std::string::npos;
}

// What the benchmark's parser returns: the letter ("" when none), or MVBench's process() output.
std::string parse_answer(const std::string& answer, VideoChoiceBenchmark benchmark) {
  if (benchmark == VideoChoiceBenchmark::kMvBench) return mvbench_process(answer);
  std::string s = py_strip(answer);
  for (const std::string& p : prefixes(benchmark)) s = replace_all(s, p, "");
  const std::string options = letters(benchmark);
  const size_t at = s.find_first_of(options);
  if (py_split(s).size() > 10 && at == std::string::npos) return "";
  return at == std::string::npos ? "" : std::string(1, s[at]);
}

std::string text_field(const json& row, const char* key, const std::string& where, bool required) {
  if (!row.contains(key) || row[key].is_null()) {
    if (required) fail(where + ": no \"" + key + "\"");
    return "";
  }
  if (row[key].is_string()) return row[key].get<std::string>();
  if (row[key].is_number_integer()) return std::to_string(row[key].get<long long>());
  fail(where + ": \"" + key + "\" must be a string");
}

// MVBench's answer letter for a row (see read_video_choice_annotations in the header).
std::string mvbench_letter(const json& row, const std::string& where) {
  const std::string answer = text_field(row, "answer", where, true);
  std::vector<std::string> candidates;
  const bool has_candidates = row.contains("candidates") && !row["candidates"].is_null();
  if (has_candidates) {
    if (!row["candidates"].is_array()) fail(where + ": \"candidates\" must be a list of strings");
    for (const json& c : row["candidates"]) {
      if (!c.is_string()) fail(where + ": \"candidates\" must be a list of strings");
      candidates.push_back(c.get<std::string>());
    }
    if (candidates.size() > 26) fail(where + ": more than 26 \"candidates\" (lmms-eval letters them A-Z)");
    // mvbench_process_results: the letter of the first candidate equal to doc["answer"].
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i] == answer) return std::string(1, static_cast<char>('A' + i));
  }
  // "B", or "(B) option text" as mvbench_doc_to_text writes an option.
  const auto is_letter = [](char c) { return c >= 'A' && c <= 'Z'; };
  char letter = 0;
  std::string text;
  if (answer.size() == 1 && is_letter(answer[0])) {
    letter = answer[0];
  } else if (answer.size() >= 3 && answer[0] == '(' && is_letter(answer[1]) && answer[2] == ')') {
    letter = answer[1];
    text = py_strip(answer.substr(3));
  }
  if (!letter)
    fail(where + ": \"answer\" \"" + answer + "\" is " + (has_candidates ? "not one of the \"candidates\", " : "not ") +
         "a letter or \"(A) option\"" + (has_candidates ? "" : " (give \"candidates\" to answer with the option text)"));
  const size_t index = static_cast<size_t>(letter - 'A');
  if (!has_candidates) {
    if (index >= 5) fail(where + ": \"answer\" must be a letter A-E without \"candidates\", got \"" + answer + "\"");
  } else if (index >= candidates.size()) {
    fail(where + ": \"answer\" \"" + answer + "\" names option " + letter + " but the row has " +
         std::to_string(candidates.size()) + " \"candidates\"");
  } else if (!text.empty() && text != py_strip(candidates[index])) {
    fail(where + ": \"answer\" \"" + answer + "\" does not match candidate " + letter + " \"" + candidates[index] + "\"");
  }
  return std::string(1, letter);
}

// A JSON list of rows, or JSON Lines.
std::vector<json> read_rows(const std::string& path) {
  const std::string text = read_text_file(path, "annotations");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const json all = detail::read_json_file(path, "annotations");
    return std::vector<json>(all.begin(), all.end());
  }
  std::vector<json> rows;
  detail::for_each_jsonl(path, "annotations", [&](const json& row, const std::string&) { rows.push_back(row); });
  return rows;
}

}  // namespace

std::string video_choice_letter(const std::string& answer, VideoChoiceBenchmark benchmark) {
  const std::string read = parse_answer(answer, benchmark);
  return is_option_letter(read, benchmark) ? read : "";
}

std::unordered_map<std::string, VideoChoiceQuestion> read_video_choice_annotations(const std::string& path,
                                                                                   VideoChoiceBenchmark benchmark) {
  std::unordered_map<std::string, VideoChoiceQuestion> out;
  const std::vector<json> rows = read_rows(path);
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string where = "annotations " + path + " row " + std::to_string(i + 1);
    if (!row.is_object()) fail(where + ": expected an object (a " + benchmark_name(benchmark) + " row)");
    VideoChoiceQuestion q;
    std::string id;
    if (benchmark == VideoChoiceBenchmark::kVideoMme) {
      id = text_field(row, "question_id", where, true);
      q.answer = text_field(row, "answer", where, true);
      if (q.answer.size() != 1 || letters(benchmark).find(q.answer) == std::string::npos)
        fail(where + ": \"answer\" must be one of A, B, C, D, got \"" + q.answer + "\"");
      for (const char* kind : {"duration", "domain", "task_type"}) {
        const std::string v = text_field(row, kind, where, false);
        if (!v.empty()) q.groups.emplace_back(kind, v);
      }
    } else if (benchmark == VideoChoiceBenchmark::kMvBench) {
      id = text_field(row, "question_id", where, true);
      q.answer = mvbench_letter(row, where);
      const std::string task = text_field(row, "task", where, true);
      if (task.empty()) fail(where + ": \"task\" is empty");
      q.groups.emplace_back("task", task);
    } else {
      id = text_field(row, "id", where, true);
      if (!row.contains("correct_choice") || !row["correct_choice"].is_number_integer())
        fail(where + ": no integer \"correct_choice\"");
      const long long c = row["correct_choice"].get<long long>();
      if (c < 0 || c > 4) fail(where + ": \"correct_choice\" must be 0..4, got " + std::to_string(c));
      q.answer = std::string(1, static_cast<char>('A' + c));
      for (const char* kind : {"duration_group", "question_category"}) {
        const std::string v = text_field(row, kind, where, false);
        if (!v.empty()) q.groups.emplace_back(kind, v);
      }
    }
    if (!out.emplace(id, q).second) fail(where + ": question id \"" + id + "\" appears twice");
  }
  if (out.empty()) fail("annotations " + path + ": no " + benchmark_name(benchmark) + " rows");
  return out;
}

VideoChoiceResult score_video_choice(const AnswerFile& answers,
                                     const std::unordered_map<std::string, VideoChoiceQuestion>& questions,
                                     VideoChoiceBenchmark benchmark) {
  VideoChoiceResult r;
  const LatestAnswers latest = latest_answers(answers, [&](const Answer& a) { return questions.count(a.question_id) > 0; });
  r.error_records = latest.error_records;
  r.unmatched = latest.unmatched;
  r.duplicates = latest.duplicates;
  for (const auto& id : latest.order) {
    const VideoChoiceQuestion& q = questions.at(id);
    const std::string& text = latest.by_id.at(id)->text;
    // mvbench_aggregate_results counts only results whose pred_answer != "".
    if (benchmark == VideoChoiceBenchmark::kMvBench && text.empty()) {
      ++r.empty;
      continue;
    }
    // mcq_acc compares process(pred) with process(the annotation's letter); for A-E both are letters.
    const std::string read = parse_answer(text, benchmark);
    const bool correct = read == (benchmark == VideoChoiceBenchmark::kMvBench ? mvbench_process(q.answer) : q.answer);
    ++r.total;
    r.correct += correct;
    r.unparsed += !is_option_letter(read, benchmark);
    for (const auto& [kind, value] : q.groups) {
      auto& g = r.by_group[kind + ": " + value];
      ++g.first;
      g.second += correct;
    }
  }
  r.missing = questions.size() - latest.by_id.size();
  r.accuracy = r.total ? 100.0 * static_cast<double>(r.correct) / static_cast<double>(r.total) : 0.0;
  return r;
}

}  // namespace era::score
