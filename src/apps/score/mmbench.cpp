#include "apps/score/mmbench.h"

#include <algorithm>
#include <map>
#include <set>

#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// pandas' default NA strings, plus LLaVA's is_none() ("nan"/"none" in any case).
bool is_none(const std::string& v) {
  static const std::set<std::string> na = {"",     "#N/A",   "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN",
                                           "-nan", "1.#IND", "1.#QNAN",  "<NA>", "N/A",     "NA",       "NULL",
                                           "NaN",  "None",   "n/a",      "nan",  "null"};
  if (na.count(v)) return true;
  const std::string l = py_lower(v);
  return l == "nan" || l == "none";
}

bool is_alnum_ascii(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::optional<char> answer_is_letter(const std::string& pred, const std::string& letters) {
  const std::string phrase = "answer is";
  for (size_t pos = 0; pos < pred.size(); ++pos) {
    // Match the phrase case-insensitively on the original bytes (ASCII only).
    if (pred.size() - pos < phrase.size()) break;
    bool match = true;
    for (size_t k = 0; k < phrase.size() && match; ++k) {
      char c = pred[pos + k];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      match = c == phrase[k];
    }
    if (!match) continue;
    size_t i = pos + phrase.size();
    while (i < pred.size() && (pred[i] == ' ' || pred[i] == '\t' || pred[i] == ':')) ++i;
    if (i < pred.size() && pred[i] == '(') ++i;
    if (i < pred.size() && letters.find(pred[i]) != std::string::npos && (i + 1 == pred.size() || !is_alnum_ascii(pred[i + 1])))
      return pred[i];
  }
  return std::nullopt;
}

}  // namespace

int Tsv::column(const std::string& name) const {
  const auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

Tsv parse_tsv(const std::string& text, const std::set<std::string>& drop_columns) {
  enum State { kStart, kField, kQuoted, kQuoteInQuoted };
  std::vector<std::vector<std::string>> lines;
  std::vector<std::string> row;
  std::string field;
  State state = kStart;
  std::vector<bool> dropped;              // per column, known once the header row is complete
  bool header_done = false, any = false;  // any: the current line has a character
  auto append = [&](char c) {
    any = true;
    if (!header_done || row.size() >= dropped.size() || !dropped[row.size()]) field += c;
  };
  auto end_field = [&] {
    row.push_back(field);
    field.clear();
    state = kStart;
  };
  auto end_row = [&] {
    end_field();
    if (row.size() > 1 || any) {  // blank lines are skipped
      if (!header_done) {
        header_done = true;
        for (const auto& name : row) dropped.push_back(drop_columns.count(name) > 0);
      }
      lines.push_back(row);
    }
    row.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool newline = c == '\n' || c == '\r';
    if (newline && c == '\r' && i + 1 < text.size() && text[i + 1] == '\n' && state != kQuoted) ++i;
    switch (state) {
      case kStart:
        if (c == '"') {
          state = kQuoted;
          any = true;
        } else if (c == '\t') end_field();
        else if (newline) end_row();
        else {
          append(c);
          state = kField;
        }
        break;
      case kField:
        if (c == '\t') end_field();
        else if (newline) end_row();
        else append(c);
        break;
      case kQuoted:
        if (c == '"') state = kQuoteInQuoted;
        else append(c);
        break;
      case kQuoteInQuoted:
        if (c == '"') {
          append('"');
          state = kQuoted;
        } else if (c == '\t') {
          end_field();
        } else if (newline) {
          end_row();
        } else {
          append(c);
          state = kField;
        }
        break;
    }
  }
  if (state != kStart || !field.empty() || !row.empty()) end_row();
  Tsv tsv;
  if (lines.empty()) return tsv;
  tsv.header = lines.front();
  tsv.rows.assign(lines.begin() + 1, lines.end());
  return tsv;
}

std::vector<MmbRow> read_mmbench_tsv(const std::string& path) {
  const Tsv tsv = parse_tsv(read_text_file(path, "annotations"), {"image"});
  const int index_col = tsv.column("index"), answer_col = tsv.column("answer");
  if (index_col < 0) fail("annotations " + path + ": no \"index\" column (expected an MMBench TSV)");
  if (answer_col < 0) fail("annotations " + path + ": no \"answer\" column (the test split has no answers; score dev)");
  const int category_col = tsv.column("category"), l2_col = tsv.column("l2-category");
  std::vector<int> option_cols;
  for (const char* letter : {"A", "B", "C", "D", "E", "F", "G", "H", "I"}) {
    const int c = tsv.column(letter);
    if (c < 0) break;
    option_cols.push_back(c);
  }
  std::vector<MmbRow> out;
  std::set<int64_t> seen;
  for (size_t r = 0; r < tsv.rows.size(); ++r) {
    const auto& row = tsv.rows[r];
    const std::string where = "annotations " + path + " row " + std::to_string(r + 1);
    auto cell = [&](int c) -> std::string { return c >= 0 && static_cast<size_t>(c) < row.size() ? row[c] : ""; };
    MmbRow m;
    try {
      size_t used = 0;
      m.index = std::stoll(cell(index_col), &used);
      if (used != cell(index_col).size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(where + ": index \"" + cell(index_col) + "\" is not an integer");
    }
    if (!seen.insert(m.index).second) fail(where + ": index " + std::to_string(m.index) + " appears twice");
    m.answer = py_strip(cell(answer_col));
    if (is_none(m.answer)) fail(where + ": no answer (the test split has no answers; score dev)");
    for (const int c : option_cols) {
      if (is_none(cell(c))) break;
      m.options.push_back(cell(c));
    }
    m.category = cell(category_col);
    m.l2_category = cell(l2_col);
    out.push_back(std::move(m));
  }
  if (out.empty()) fail("annotations " + path + ": no rows");
  return out;
}

std::optional<char> mmbench_extract(const std::string& prediction, const std::vector<std::string>& options) {
  static const char* const refusals[] = {"Sorry, I can't help with images of people yet.", "I can't process this file.",
                                         "I'm sorry, but without the image provided", "Cannot determine the answer"};
  for (const char* r : refusals)
    if (contains(prediction, r)) return 'Z';
  std::string letters;
  for (size_t i = 0; i < options.size(); ++i) letters += static_cast<char>('A' + i);

  std::string s = prediction;
  for (char& c : s)
    if (std::string_view(".()[],:;!*#{}").find(c) != std::string_view::npos) c = ' ';
  const auto toks = py_split(s);
  auto position = [&](const std::string& t) -> long {
    const auto it = std::find(toks.begin(), toks.end(), t);
    return it == toks.end() ? -1 : static_cast<long>(it - toks.begin());
  };
  size_t count = 0;
  for (const char c : letters) count += position(std::string(1, c)) >= 0;
  if (count == 1) {
    for (const char c : letters) {
      const long at = position(std::string(1, c));
      if (at >= 0 && at > static_cast<long>(toks.size()) - 5) return c;
    }
  } else if (count == 0 && position("Z") >= 0) {
    return 'Z';
  }
  if (const auto x = answer_is_letter(prediction, letters)) return x;

  size_t total = 0;
  for (const auto& o : options) total += py_len(o);
  if (py_len(prediction) > 2 * total) return std::nullopt;
  const std::string lower = py_lower(prediction);
  std::optional<char> found;
  size_t hits = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    if (contains(lower, py_lower(options[i]))) {
      ++hits;
      found = letters[i];
    }
  }
  return hits == 1 ? found : std::nullopt;
}

MmbResult score_mmbench(const AnswerFile& answers, const std::vector<MmbRow>& rows) {
  MmbResult r;
  std::map<int64_t, const MmbRow*> by_index;
  for (const auto& row : rows) by_index[row.index] = &row;
  std::map<int64_t, const Answer*> latest;
  for (const auto& a : answers.records) {
    if (a.is_error) {
      ++r.error_records;
      continue;
    }
    int64_t index = 0;
    try {
      size_t used = 0;
      index = std::stoll(a.question_id, &used);
      if (used != a.question_id.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      ++r.unmatched;
      continue;
    }
    if (!by_index.count(index)) {
      ++r.unmatched;
      continue;
    }
    auto [it, inserted] = latest.emplace(index, &a);
    if (!inserted) {
      ++r.duplicates;
      it->second = &a;
    }
  }
  struct Group {
    std::vector<const MmbRow*> rows;  // by index
  };
  std::map<int64_t, Group> groups;
  for (const auto& [index, row] : by_index) groups[row->group()].rows.push_back(row);
  std::map<std::string, MmbCategory> categories;
  for (const auto& [g, group] : groups) {
    bool complete = true, correct = true;
    for (const MmbRow* row : group.rows) {
      const auto a = latest.find(row->index);
      if (a == latest.end()) {
        complete = false;
        continue;
      }
      const auto letter = mmbench_extract(a->second->text, row->options);
      if (!letter) ++r.unparsed;
      const bool right = letter && row->answer.size() == 1 && *letter == row->answer[0];
      correct = correct && right;
      if (row->index < 1000000) {
        ++r.first_pass_rows;
        r.first_pass_correct += right;
      }
    }
    if (!complete) {
      ++r.incomplete_groups;
      continue;
    }
    ++r.groups;
    r.correct_groups += correct;
    auto& cat = categories[group.rows.front()->category];
    cat.name = group.rows.front()->category;
    ++cat.groups;
    cat.correct += correct;
  }
  const auto pct = [](size_t c, size_t n) { return n ? static_cast<double>(c) / static_cast<double>(n) * 100.0 : 0.0; };
  r.circular_accuracy = pct(r.correct_groups, r.groups);
  r.first_pass_accuracy = pct(r.first_pass_correct, r.first_pass_rows);
  for (auto& [name, c] : categories) {
    c.accuracy = pct(c.correct, c.groups);
    r.by_category.push_back(c);
  }
  return r;
}

}  // namespace era::score
