#include "apps/eval/records.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include "report/result_json.h"

namespace era::eval {
Json answer_record(const Question& q, const Result& r, const RunSettings& run, const std::string& answer_id, int64_t batch_size) {
  const Stats& s = r.stats;
  Json meta = {{"line", q.line},
               {"method", run.method},
               {"tokens", run.tokens},
               {"visual_tokens", s.visual_tokens},
               {"generated_tokens", s.generated_tokens},
               {"finish_reason", r.finish_reason},
               {"batch_size", batch_size},
               {"timings", timings_json(s, /*round_to_us=*/true)}};
  if (run.keep_ratio > 0.0f) meta["keep_ratio"] = run.keep_ratio;
  Json j;
  j["question_id"] = q.question_id;
  j["prompt"] = q.text;
  j["text"] = r.text;
  j["answer_id"] = answer_id;
  j["model_id"] = run.model_id;
  j["metadata"] = std::move(meta);
  return j;
}

Json error_record(const Question& q, const std::string& message) {
  Json j;
  j["question_id"] = q.question_id;
  j["line"] = q.line;
  j["error"] = message;
  j["metadata"] = {{"line", q.line}, {"error", message}};
  return j;
}

std::string to_line(const Json& record) { return record.dump(-1, ' ', false, Json::error_handler_t::replace); }

StoredRecord parse_record(const std::string& text, const std::string& where) {
  StoredRecord rec;
  try {
    rec.json = Json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorCode::kInvalidArgument, where + " is not JSON; is this an era_eval answers file?");
  }
  const auto index = [](const Json& j) -> int64_t {
    if (!j.is_object()) return -1;
    const auto it = j.find("line");
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
  };
  if (rec.json.is_object()) {
    const auto meta = rec.json.find("metadata");
    rec.line = meta != rec.json.end() ? index(*meta) : -1;
    if (rec.line < 0) rec.line = index(rec.json);
    rec.is_error = rec.json.contains("error");
  }
  if (rec.line < 0) {
    throw Error(ErrorCode::kInvalidArgument, where + " has no line index (metadata.line); is this an era_eval answers file?");
  }
  return rec;
}

AnswerIdGenerator::AnswerIdGenerator() {
  std::random_device rd;
  const uint64_t t = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  std::seed_seq seq{
      rd(), rd(), rd(), rd(), static_cast<unsigned>(t), static_cast<unsigned>(t >> 32), static_cast<unsigned>(::getpid())};
  rng_.seed(seq);
}

std::string AnswerIdGenerator::next() {
  static const char kAlphabet[] = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";  // shortuuid's
  constexpr unsigned kBase = sizeof(kAlphabet) - 1;                                             // 57
  unsigned __int128 v = (static_cast<unsigned __int128>(rng_()) << 64) | rng_();
  std::string id(22, kAlphabet[0]);  // 57^22 > 2^128
  for (int i = 21; i >= 0; --i) {
    id[static_cast<size_t>(i)] = kAlphabet[static_cast<unsigned>(v % kBase)];
    v /= kBase;
  }
  return id;
}

}  // namespace era::eval
