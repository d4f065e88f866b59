#include "text/byte_level_bpe.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "era/error.h"
#include "util/input_file.h"
#include "util/utf8.h"

namespace era {
namespace {

using json = nlohmann::json;

// GPT-2's pattern, which the ByteLevel pre-tokenizer applies itself when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

[[noreturn]] void refuse(const std::string& source, const std::string& field, const std::string& why) {
  throw Error(ErrorCode::kBundle, source + ": " + field + ": " + why);
}

// ---- UTF-8 ---------------------------------------------------------------------------------

void check_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8::sequence_length(text, i);
    if (!n) throw Error(ErrorCode::kPrompt, "the text is not valid UTF-8 (byte " + std::to_string(i) + ")");
    i += n;
  }
}

UChar32 code_point_before(const std::string& text, size_t end) {
  if (end == 0) return U_SENTINEL;
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + start, end - start));
  return u.char32At(0);
}

UChar32 code_point_at(const std::string& text, size_t start) {
  if (start >= text.size()) return U_SENTINEL;
  const size_t n = std::max<size_t>(1, utf8::sequence_length(text, start));
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + start, n));
  return u.char32At(0);
}

size_t code_point_length(UChar32 c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// ---- the byte-level alphabet (GPT-2's bytes_to_unicode) ---------------------------------------
struct ByteAlphabet {
  std::array<std::string, 256> byte_to_symbol;  // UTF-8 of the code point standing for the byte
  std::unordered_map<UChar32, unsigned char> symbol_to_byte;
  ByteAlphabet() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const UChar32 cp = printable ? b : 256 + extra++;
      std::string utf8;
      icu::UnicodeString(cp).toUTF8String(utf8);
      byte_to_symbol[b] = utf8;
      symbol_to_byte[cp] = static_cast<unsigned char>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---- pieces of the pipeline ------------------------------------------------------------------
// A span of text: either an added token's id, or text still to tokenise.
struct Span {
  std::string text;
  std::optional<int64_t> id;
};

// The work a Split pattern may do. A pattern from tokenizer.json may backtrack exponentially
// ("(a+)+$" on 40 a's runs for hours), so each search is stopped once it exceeds a budget, counted
// in ICU's steps (one per 10,000 backtracking states saved, reported through the match callback;
// about 0.2 ms each). ICU's own setTimeLimit counts from the matcher's reset, so over a whole text,
// and would refuse a long ordinary prompt; the budgets here grow with the text instead:
//   per search  kBaseSteps + 1 step per 100 characters still to search (100 states a character;
//               the Qwen2 and GPT-2 patterns save 2 at most: a run of whitespace);
//   per prompt  kBaseSteps + 1 step per 10 bytes of the prompt (1,000 states a character), so a
//               pattern that spends just under the search budget on every word still ends.
// Real patterns thus never come near either bound, and a hostile one gives up after ~0.2 s plus
// ~20 ms per thousand characters.
constexpr int64_t kBaseSteps = 1000;
struct RegexBudget {
  int64_t search_steps = 0, search_limit = 0;
  int64_t prompt_steps = 0, prompt_limit = 0;
};

UBool U_CALLCONV count_regex_steps(const void* context, int32_t /*steps since the matcher's reset*/) {
  auto* budget = static_cast<RegexBudget*>(const_cast<void*>(context));
  ++budget->search_steps;
  ++budget->prompt_steps;
  return budget->search_steps < budget->search_limit && budget->prompt_steps < budget->prompt_limit;
}

// The backtracking stack a search may use: ICU's default (8 MB) overflows on a run of ~350,000
// blanks with the Qwen2 pattern (24 bytes a blank), text the library splits without trouble;
// 8 MB and 256 bytes a character of the piece is ten times what that pattern needs, and still
// bounds a hostile one by the text's length.
int32_t regex_stack_limit(int32_t piece_length) {
  return static_cast<int32_t>(
      std::min<int64_t>(std::numeric_limits<int32_t>::max(), (int64_t{8} << 20) + int64_t{256} * piece_length));
}

// The first characters of `u` from `start`, quoted, for an error message.
std::string quote_text(const icu::UnicodeString& u, int32_t start) {
  const int32_t end = u.moveIndex32(start, 40);
  std::string s;
  u.tempSubStringBetween(start, end).toUTF8String(s);
  return json(s).dump() + (end < u.length() ? "..." : "");
}

std::unique_ptr<icu::RegexPattern> compile(const std::string& pattern, const std::string& source, const std::string& field) {
  UParseError parse_error{};
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexPattern> compiled(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, parse_error, status));
  if (U_FAILURE(status))
    refuse(source, field,
           "the regular expression does not compile (" + std::string(u_errorName(status)) + " at offset " +
               std::to_string(parse_error.offset) + ")");
  return compiled;
}

uint64_t pair_key(int64_t a, int64_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

// The id at `field` (model.vocab["x"] or added_tokens[i].id), which must lie below `limit`: the
// number of tokens the file lists. The tables by id are allocated from the largest id, so an id
// far beyond what the file holds (10^9 in a 1 KB file) would cost gigabytes before anything else
// is checked; a real vocabulary numbers its tokens from 0 without gaps, and an added token
// sharing a vocabulary entry's id only lowers the largest id.
int64_t read_id(const json& value, int64_t limit, const std::string& source, const std::string& field) {
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0))
    refuse(source, field, "must be a non-negative integer id (is " + value.dump() + ")");
  const uint64_t id = value.get<uint64_t>();
  if (id >= static_cast<uint64_t>(limit))
    refuse(source, field,
           "id " + std::to_string(id) + " is beyond the vocabulary: the file lists " + std::to_string(limit) +
               " tokens (model.vocab and added_tokens), so every id must be below " + std::to_string(limit));
  return static_cast<int64_t>(id);
}

}  // namespace

struct ByteLevelBpe::Impl {
  // The types of its members are its own, not the unnamed namespace's: Impl has external linkage,
  // and a member of an internal type would differ from one translation unit to the next.
  struct AddedTokenRule {
    std::string content;
    int64_t id = 0;
    bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
  };
  struct SplitStep {
    std::unique_ptr<icu::RegexPattern> pattern;
    bool remove_matches = false;  // behavior Removed (else Isolated)
    std::string field;            // where the pattern is in tokenizer.json, for errors
  };

  std::string source;
  int64_t id_limit = 0;  // entries of model.vocab plus added_tokens: every id lies below it (read_id)
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> id_to_token;                              // vocabulary and added tokens by id ("" where none)
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> merges;  // (a, b) -> (rank, merged id)
  bool ignore_merges = false;
  std::vector<AddedTokenRule> added;  // by content, longest first (the leftmost-longest matcher's order)
  std::vector<bool> special;          // by id
  std::vector<const icu::Normalizer2*> normalizers;
  std::vector<SplitStep> splits;  // the Split steps and, for ByteLevel(use_regex), GPT-2's pattern
  bool add_prefix_space = false;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  void read_added_tokens(const json& doc);
  void read_normalizer(const json& node, const std::string& field);
  void read_pre_tokenizer(const json& node, const std::string& field);
  void read_model(const json& model);
  void check_decoder(const json& doc);
  void probe_patterns() const;

  std::vector<Span> split_added(const std::vector<Span>& spans, bool normalized) const;
  std::string normalize(const std::string& text) const;
  void split(const SplitStep& step, const std::string& piece, RegexBudget& budget, std::vector<std::string>& out) const;
  std::vector<std::string> pre_tokenize(const std::string& text, RegexBudget& budget) const;
  std::vector<int64_t> bpe(const std::string& word) const;
};

namespace {

template <typename T>
T get_field(const json& node, const char* key, T fallback, const std::string& source, const std::string& field) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  try {
    return node[key].get<T>();
  } catch (const json::exception&) {
    refuse(source, field + "." + key, "has the wrong type (" + std::string(node[key].type_name()) + ")");
  }
}

}  // namespace

void ByteLevelBpe::Impl::read_added_tokens(const json& doc) {
  if (!doc.contains("added_tokens") || doc["added_tokens"].is_null()) return;
  if (!doc["added_tokens"].is_array()) refuse(source, "added_tokens", "must be a list");
  std::unordered_map<int64_t, size_t> index_by_id;  // the first added token on each id
  for (size_t i = 0; i < doc["added_tokens"].size(); ++i) {
    const json& t = doc["added_tokens"][i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id") ||
        !t["id"].is_number_integer())
      refuse(source, field, "needs a string \"content\" and a non-negative integer \"id\"");
    AddedTokenRule a;
    a.content = t["content"].get<std::string>();
    if (a.content.empty()) refuse(source, field + ".content", "is empty");
    a.id = read_id(t["id"], id_limit, source, field + ".id");
    // Two added tokens on one id: decoding could not say which text the id stands for.
    const auto [first, fresh] = index_by_id.emplace(a.id, i);
    if (!fresh && added[first->second].content != a.content)
      refuse(source, field + ".id",
             "id " + std::to_string(a.id) + " is also added_tokens[" + std::to_string(first->second) + "].id");
    a.special = get_field<bool>(t, "special", false, source, field);
    a.lstrip = get_field<bool>(t, "lstrip", false, source, field);
    a.rstrip = get_field<bool>(t, "rstrip", false, source, field);
    a.single_word = get_field<bool>(t, "single_word", false, source, field);
    a.normalized = get_field<bool>(t, "normalized", !a.special, source, field);
    added.push_back(a);
  }
  std::stable_sort(added.begin(), added.end(),
                   [](const AddedTokenRule& x, const AddedTokenRule& y) { return x.content.size() > y.content.size(); });
}

void ByteLevelBpe::Impl::read_normalizer(const json& node, const std::string& field) {
  if (node.is_null()) return;
  const std::string type = get_field<std::string>(node, "type", "", source, field);
  UErrorCode status = U_ZERO_ERROR;
  if (type == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array())
      refuse(source, field + ".normalizers", "must be a list");
    for (size_t i = 0; i < node["normalizers"].size(); ++i)
      read_normalizer(node["normalizers"][i], field + ".normalizers[" + std::to_string(i) + "]");
    return;
  }
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else if (type == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  else refuse(source, field + ".type", "\"" + type + "\" is not supported (NFC, NFKC, NFD, NFKD, Sequence)");
  if (U_FAILURE(status)) refuse(source, field, std::string("ICU has no such normaliser: ") + u_errorName(status));
  normalizers.push_back(n);
}

void ByteLevelBpe::Impl::read_pre_tokenizer(const json& node, const std::string& field) {
  const std::string type = get_field<std::string>(node, "type", "", source, field);
  if (type == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      refuse(source, field + ".pretokenizers", "must be a list");
    for (size_t i = 0; i < node["pretokenizers"].size(); ++i)
      read_pre_tokenizer(node["pretokenizers"][i], field + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  }
  if (type == "Split") {
    const json pattern = node.value("pattern", json());
    if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
      refuse(source, field + ".pattern", "must be {\"Regex\": \"...\"} (a String pattern is not supported)");
    if (get_field<bool>(node, "invert", false, source, field)) refuse(source, field + ".invert", "true is not supported");
    const std::string behavior = get_field<std::string>(node, "behavior", "", source, field);
    if (behavior != "Isolated" && behavior != "Removed")
      refuse(source, field + ".behavior", "\"" + behavior + "\" is not supported (Isolated, Removed)");
    splits.push_back({compile(pattern["Regex"].get<std::string>(), source, field + ".pattern.Regex"), behavior == "Removed",
                      field + ".pattern.Regex"});
    return;
  }
  if (type == "ByteLevel") {
    add_prefix_space = get_field<bool>(node, "add_prefix_space", false, source, field);
    if (get_field<bool>(node, "use_regex", true, source, field))
      splits.push_back({compile(kGpt2Pattern, source, field), false, field + " (ByteLevel's regex)"});
    return;
  }
  refuse(source, field + ".type", "\"" + type + "\" is not supported (ByteLevel, Split, Sequence)");
}

void ByteLevelBpe::Impl::read_model(const json& model) {
  if (!model.is_object()) refuse(source, "model", "is missing");
  const std::string type = get_field<std::string>(model, "type", "", source, "model");
  if (type != "BPE") refuse(source, "model.type", "\"" + type + "\" is not a byte-level BPE (expected BPE)");
  if (get_field<double>(model, "dropout", 0.0, source, "model") != 0.0)
    refuse(source, "model.dropout", "dropout is for training; a tokenizer for inference has none");
  if (get_field<bool>(model, "byte_fallback", false, source, "model"))
    refuse(source, "model.byte_fallback", "true is a SentencePiece-style BPE, not byte-level");
  if (!get_field<std::string>(model, "continuing_subword_prefix", "", source, "model").empty() ||
      !get_field<std::string>(model, "end_of_word_suffix", "", source, "model").empty())
    refuse(source, "model", "subword prefixes and suffixes are not byte-level BPE");
  ignore_merges = get_field<bool>(model, "ignore_merges", false, source, "model");
  if (!model.contains("vocab") || !model["vocab"].is_object()) refuse(source, "model.vocab", "must be an object");
  int64_t max_id = -1;
  std::unordered_map<int64_t, std::string> token_by_id;  // the first token on each id
  for (const auto& [token, value] : model["vocab"].items()) {
    const std::string field = "model.vocab[" + json(token).dump() + "]";
    const int64_t id = read_id(value, id_limit, source, field);
    // Two tokens on one id: decoding could not say which text the id stands for.
    const auto [first, fresh] = token_by_id.emplace(id, token);
    if (!fresh) refuse(source, field, "id " + std::to_string(id) + " is also model.vocab[" + json(first->second).dump() + "]'s");
    vocab[token] = id;
    max_id = std::max(max_id, id);
  }
  token_by_id.clear();
  for (const AddedTokenRule& a : added) max_id = std::max(max_id, a.id);
  // Every id is below id_limit (read_id), so these tables are no larger than the file's lists.
  id_to_token.assign(static_cast<size_t>(max_id + 1), "");
  special.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : vocab) id_to_token[static_cast<size_t>(id)] = token;
  for (const AddedTokenRule& a : added) {
    id_to_token[static_cast<size_t>(a.id)] = a.content;
    special[static_cast<size_t>(a.id)] = a.special;
  }
  if (!model.contains("merges") || !model["merges"].is_array()) refuse(source, "model.merges", "must be a list");
  const json& list = model["merges"];
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const std::string field = "model.merges[" + std::to_string(rank) + "]";
    std::string a, b;
    if (list[rank].is_string()) {  // "a b" (tokenizers < 0.20)
      const std::string s = list[rank].get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        refuse(source, field, "\"" + s + "\" is not two symbols separated by one space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (list[rank].is_array() && list[rank].size() == 2 && list[rank][0].is_string() && list[rank][1].is_string()) {
      a = list[rank][0].get<std::string>();
      b = list[rank][1].get<std::string>();
    } else {
      refuse(source, field, "must be \"a b\" or [\"a\", \"b\"]");
    }
    const auto ia = vocab.find(a), ib = vocab.find(b), merged = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || merged == vocab.end())
      refuse(source, field, "merges \"" + a + "\" and \"" + b + "\", which (or whose join) are not in model.vocab");
    merges.emplace(pair_key(ia->second, ib->second), std::make_pair(static_cast<int64_t>(rank), merged->second));
  }
}

void ByteLevelBpe::Impl::check_decoder(const json& doc) {
  const json decoder = doc.value("decoder", json());
  const std::string type = decoder.is_object() ? decoder.value("type", "") : "";
  if (type != "ByteLevel") refuse(source, "decoder.type", "\"" + type + "\" is not supported (ByteLevel)");
}

// Refuses, when the bundle loads, a Split pattern that backtracks without end on text as plain as a
// run of one character ("(a+)+$" on 30 a's and a "!"): better than a request refused (or, without
// the budget, a server hung) on each such prompt later. Real patterns split these texts in
// microseconds; a catastrophic one is stopped by the same budget as at request time (~0.2 s).
// Patterns that explode only on rarer text are still stopped on that text by split().
void ByteLevelBpe::Impl::probe_patterns() const {
  static const char* const kRuns[] = {"a", "A", "0", " ", "\n", "!", "'", "_", "\xC3\xA9", "\xE4\xB8\xAD"};
  static const char* const kEnds[] = {"!", "a", " ", "0", "\n", "\x01"};
  for (const SplitStep& step : splits)
    for (const char* run : kRuns)
      for (const char* end : kEnds) {
        std::string probe;
        for (int i = 0; i < 30; ++i) probe += run;
        probe += end;
        RegexBudget budget;
        budget.prompt_limit = kBaseSteps;
        std::vector<std::string> pieces;
        try {
          split(step, probe, budget, pieces);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kPrompt) throw;  // not the budget: ICU itself failed
          refuse(source, step.field,
                 "the pattern backtracks without end on the probe text " + json(probe).dump() +
                     " (catastrophic backtracking): every prompt like it would be refused");
        }
      }
}

// Cuts every span still to tokenise at the added tokens of the given kind (normalized or not),
// leftmost-longest, with each token's lstrip / rstrip / single_word rules.
std::vector<Span> ByteLevelBpe::Impl::split_added(const std::vector<Span>& spans, bool normalized) const {
  std::vector<Span> out;
  for (const Span& span : spans) {
    if (span.id) {
      out.push_back(span);
      continue;
    }
    const std::string& text = span.text;
    size_t done = 0, pos = 0;
    while (pos < text.size()) {
      const AddedTokenRule* hit = nullptr;
      for (const AddedTokenRule& a : added)  // longest first: the first that matches is the longest
        if (a.normalized == normalized && text.compare(pos, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
      size_t start = pos, stop = hit ? pos + hit->content.size() : pos;
      if (hit && hit->single_word) {
        const auto is_word = [](UChar32 c) { return c != U_SENTINEL && (u_isalnum(c) || c == '_'); };
        if (is_word(code_point_before(text, start)) || is_word(code_point_at(text, stop))) hit = nullptr;
      }
      if (!hit) {
        pos += std::max<size_t>(1, utf8::sequence_length(text, pos));
        continue;
      }
      if (hit->lstrip)
        while (start > done && u_isUWhiteSpace(code_point_before(text, start)))
          start -= code_point_length(code_point_before(text, start));
      if (hit->rstrip)
        while (stop < text.size() && u_isUWhiteSpace(code_point_at(text, stop)))
          stop += code_point_length(code_point_at(text, stop));
      if (start > done) out.push_back({text.substr(done, start - done), std::nullopt});
      out.push_back({text.substr(start, stop - start), hit->id});
      done = pos = stop;
    }
    if (done < text.size()) out.push_back({text.substr(done), std::nullopt});
  }
  return out;
}

std::string ByteLevelBpe::Impl::normalize(const std::string& text) const {
  if (normalizers.empty()) return text;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  for (const icu::Normalizer2* n : normalizers) {
    UErrorCode status = U_ZERO_ERROR;
    u = n->normalize(u, status);
    if (U_FAILURE(status)) throw Error(ErrorCode::kPrompt, std::string("normalisation failed: ") + u_errorName(status));
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

// One Split step on one piece: the matches (unless Removed) and the text between them, in order.
// Throws era::Error(kPrompt) naming the pattern and the text when a search exceeds its budget
// (RegexBudget) or its backtracking stack.
void ByteLevelBpe::Impl::split(const SplitStep& step, const std::string& piece, RegexBudget& budget,
                               std::vector<std::string>& out) const {
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(piece);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(step.pattern->matcher(u, status));
  if (m) m->setMatchCallback(count_regex_steps, &budget, status);
  if (m) m->setStackLimit(regex_stack_limit(u.length()), status);
  if (U_FAILURE(status)) throw Error(ErrorCode::kRuntime, std::string("regex matcher: ") + u_errorName(status));
  int32_t done = 0;
  const auto emit = [&](int32_t a, int32_t b) {
    if (b <= a) return;
    std::string s;
    u.tempSubStringBetween(a, b).toUTF8String(s);
    out.push_back(std::move(s));
  };
  for (;;) {
    budget.search_steps = 0;
    budget.search_limit = kBaseSteps + (u.length() - done) / 100;
    // find(status): the overload without a status stops silently on an error, which would leave
    // the rest of the piece unsplit and the ids wrong.
    const bool found = m->find(status);
    const auto text = [&] { return quote_text(u, done) + " (" + std::to_string(u.length() - done) + " characters)"; };
    if (status == U_REGEX_STOPPED_BY_CALLER)
      throw Error(ErrorCode::kPrompt, source + ": " + step.field + ": the pattern backtracks without end on the text " + text() +
                                          " and was stopped: this tokenizer's pattern cannot split such " +
                                          "text (catastrophic backtracking)");
    if (status == U_REGEX_STACK_OVERFLOW)
      throw Error(ErrorCode::kPrompt, source + ": " + step.field + ": the pattern needs more than " +
                                          std::to_string(regex_stack_limit(u.length()) >> 20) +
                                          " MB of backtracking memory on the text " + text());
    if (U_FAILURE(status)) throw Error(ErrorCode::kRuntime, std::string("regex search: ") + u_errorName(status));
    if (!found) break;
    const int32_t start = m->start(status), end = m->end(status);
    if (end == start) continue;  // an empty match splits nothing
    emit(done, start);
    if (!step.remove_matches) emit(start, end);
    done = end;
  }
  emit(done, u.length());
}

// The pre-tokenizer's pieces of `text`: each Split step in turn, then the byte-level mapping
// (with the prefix space when asked).
std::vector<std::string> ByteLevelBpe::Impl::pre_tokenize(const std::string& text, RegexBudget& budget) const {
  std::vector<std::string> pieces{text};
  for (const SplitStep& step : splits) {
    std::vector<std::string> next;
    for (const std::string& piece : pieces) split(step, piece, budget, next);
    pieces = std::move(next);
  }
  const ByteAlphabet& a = alphabet();
  for (std::string& piece : pieces) {
    std::string mapped;
    if (add_prefix_space && piece.rfind(' ', 0) != 0) mapped += a.byte_to_symbol[' '];
    for (const char c : piece) mapped += a.byte_to_symbol[static_cast<unsigned char>(c)];
    piece = std::move(mapped);
  }
  return pieces;
}

// BPE of one byte-level word: the lowest-ranked adjacent pair merges first, the leftmost among
// equals (the library's Word::merge_all), with a heap over a linked list of symbols.
std::vector<int64_t> ByteLevelBpe::Impl::bpe(const std::string& word) const {
  if (ignore_merges) {
    const auto whole = vocab.find(word);
    if (whole != vocab.end()) return {whole->second};
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    const auto hit = cache.find(word);
    if (hit != cache.end()) return hit->second;
  }
  struct Symbol {
    int64_t id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::max<size_t>(1, utf8::sequence_length(word, i));
    const auto found = vocab.find(word.substr(i, n));
    i += n;
    if (found == vocab.end()) continue;  // no unk token: an unknown symbol is dropped, as the library does
    symbols.push_back({found->second, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
  }
  if (!symbols.empty()) symbols.back().next = -1;
  struct Candidate {
    int64_t rank;
    int pos;
    int64_t left, right, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto push = [&](int pos) {
    if (pos < 0 || symbols[static_cast<size_t>(pos)].next < 0) return;
    const Symbol& s = symbols[static_cast<size_t>(pos)];
    const int64_t right = symbols[static_cast<size_t>(s.next)].id;
    const auto m = merges.find(pair_key(s.id, right));
    if (m != merges.end()) heap.push({m->second.first, pos, s.id, right, m->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) push(i);
  std::vector<bool> gone(symbols.size(), false);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& s = symbols[static_cast<size_t>(c.pos)];
    if (gone[static_cast<size_t>(c.pos)] || s.next < 0 || s.id != c.left || symbols[static_cast<size_t>(s.next)].id != c.right)
      continue;  // stale: one of the two has merged since
    const int right = s.next;
    s.id = c.merged;
    s.next = symbols[static_cast<size_t>(right)].next;
    gone[static_cast<size_t>(right)] = true;
    if (s.next >= 0) symbols[static_cast<size_t>(s.next)].prev = c.pos;
    push(s.prev);
    push(c.pos);
  }
  std::vector<int64_t> ids;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    ids.push_back(symbols[static_cast<size_t>(i)].id);
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() > 50000) cache.clear();  // bounded: a long-running server sees unbounded text
  cache.emplace(word, ids);
  return ids;
}

ByteLevelBpe::ByteLevelBpe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ByteLevelBpe::~ByteLevelBpe() = default;
ByteLevelBpe::ByteLevelBpe(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe& ByteLevelBpe::operator=(ByteLevelBpe&&) noexcept = default;

ByteLevelBpe ByteLevelBpe::from_file(const std::string& path) {
  return from_json_text(read_input_file(path, "tokenizer", 512ULL << 20, ErrorCode::kBundle), path);
}

ByteLevelBpe ByteLevelBpe::from_json_text(const std::string& json_text, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number such as 1e9267
    refuse(source, "(file)", std::string("is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) refuse(source, "(file)", "is not a JSON object");
  // The bound on ids (read_id), known before any table by id is sized. Without a vocabulary there
  // is none: read_model refuses the file for that, before sizing anything, and says so.
  const auto model = doc.find("model");
  if (model != doc.end() && model->is_object() && model->contains("vocab") && (*model)["vocab"].is_object()) {
    impl->id_limit = static_cast<int64_t>((*model)["vocab"].size());
    if (doc.contains("added_tokens") && doc["added_tokens"].is_array())
      impl->id_limit += static_cast<int64_t>(doc["added_tokens"].size());
  } else {
    impl->id_limit = std::numeric_limits<int64_t>::max();
  }
  impl->read_added_tokens(doc);
  impl->read_normalizer(doc.value("normalizer", json()), "normalizer");
  if (!doc.contains("pre_tokenizer") || doc["pre_tokenizer"].is_null())
    refuse(source, "pre_tokenizer", "is missing (a byte-level BPE needs the ByteLevel pre-tokenizer)");
  impl->read_pre_tokenizer(doc["pre_tokenizer"], "pre_tokenizer");
  impl->probe_patterns();
  impl->read_model(doc.value("model", json()));
  impl->check_decoder(doc);
  return ByteLevelBpe(std::move(impl));
}

std::vector<int64_t> ByteLevelBpe::encode(const std::string& text) const {
  check_utf8(text);
  std::vector<Span> spans = impl_->split_added({{text, std::nullopt}}, /*normalized=*/false);
  for (Span& s : spans)
    if (!s.id) s.text = impl_->normalize(s.text);
  spans = impl_->split_added(spans, /*normalized=*/true);
  RegexBudget budget;
  budget.prompt_limit = kBaseSteps + static_cast<int64_t>(text.size() / 10);
  std::vector<int64_t> ids;
  for (const Span& s : spans) {
    if (s.id) {
      ids.push_back(*s.id);
      continue;
    }
    for (const std::string& word : impl_->pre_tokenize(s.text, budget)) {
      const std::vector<int64_t> piece = impl_->bpe(word);
      ids.insert(ids.end(), piece.begin(), piece.end());
    }
  }
  return ids;
}

std::string ByteLevelBpe::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  return utf8::lossy(decode_bytes(ids, skip_special));
}

std::string ByteLevelBpe::decode_growing(const std::vector<int64_t>& ids, bool skip_special) const {
  const std::string bytes = decode_bytes(ids, skip_special);
  const size_t tail = utf8::incomplete_tail(bytes);
  return utf8::lossy(std::string_view(bytes).substr(0, tail)) + bytes.substr(tail);
}

std::string ByteLevelBpe::piece(int64_t id) const {
  return id >= 0 && id < size() ? impl_->id_to_token[static_cast<size_t>(id)] : "";
}

std::string ByteLevelBpe::decode_bytes(const std::vector<int64_t>& ids, bool skip_special) const {
  const ByteAlphabet& a = alphabet();
  std::string bytes;
  for (const int64_t id : ids) {
    if (id < 0 || id >= size() || impl_->id_to_token[static_cast<size_t>(id)].empty()) continue;
    if (skip_special && impl_->special[static_cast<size_t>(id)]) continue;
    const std::string& token = impl_->id_to_token[static_cast<size_t>(id)];
    // A token whose every character is a byte-level symbol is those bytes; any other (an added
    // token such as "<|im_start|>" in plain text) is its own UTF-8.
    std::string mapped;
    bool all_symbols = true;
    const icu::UnicodeString u = icu::UnicodeString::fromUTF8(token);
    for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
      const auto found = a.symbol_to_byte.find(u.char32At(i));
      if (found == a.symbol_to_byte.end()) {
        all_symbols = false;
        break;
      }
      mapped += static_cast<char>(found->second);
    }
    bytes += all_symbols ? mapped : token;
  }
  return bytes;
}

std::optional<int64_t> ByteLevelBpe::token_id(const std::string& token) const {
  for (const Impl::AddedTokenRule& a : impl_->added)
    if (a.content == token) return a.id;
  const auto found = impl_->vocab.find(token);
  if (found != impl_->vocab.end()) return found->second;
  return std::nullopt;
}

bool ByteLevelBpe::is_special(int64_t id) const { return id >= 0 && id < size() && impl_->special[static_cast<size_t>(id)]; }

int64_t ByteLevelBpe::size() const { return static_cast<int64_t>(impl_->id_to_token.size()); }

}  // namespace era
