#pragma once
// The pruning papers' "Avg. (%)" (spec §7): for each benchmark b, rel_b = score_method(b) /
// score_full(b) on the same metric and scale; Avg = 100 * the unweighted mean of rel_b over the
// benchmarks the method has (a benchmark a method lacks is shown as "-" and left out of its mean,
// as the ERA paper does for AgilePrune's missing MM-Vet). MME enters as a ratio of totals
// (Perception by default, or Perception + Cognition).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace era::score {

enum class MmeTotal { kPerception, kPerceptionCognition };

// Whether a results key is an MME score ("mme", "mme_<variant>"): the one a --mme choice affects.
bool is_mme_benchmark(const std::string& key);

// The run behind a results file (its "reduction"; era_score stores it from era_eval answers).
struct Reduction {
  std::string method;
  int64_t tokens = 0;  // nominal budget, 0 = none
  double keep_ratio = 0;
};

// The real visual tokens of one benchmark's answers (a results entry's "visual_tokens").
struct VisualTokenCount {
  double mean = 0;
  double answers = 0;  // how many answers the mean is over
};

struct MethodScores {
  std::string name;                                       // the results file's "method", else its file stem
  std::string path;                                       // the results file
  std::map<std::string, double> scores;                   // benchmark key -> headline score
  std::optional<Reduction> reduction;                     // absent in files that do not say (hand-written ones)
  std::map<std::string, VisualTokenCount> visual_tokens;  // benchmark key -> real counts, where known
};

// A results JSON as written (and merged) by `era_score --json`:
//   {"method": "...", "reduction": {"method": "era", "tokens": 64},
//    "benchmarks": {"<key>": {"score": x, "values": {...}, "visual_tokens": {"mean": m, "answers": n}, ...}, ...}}
// A hand-written file may give a bare number per benchmark ("gqa": 61.9), and "reduction" by hand.
// For MME with kPerceptionCognition the entry needs values.perception and values.cognition.
MethodScores read_results(const std::string& path, MmeTotal mme = MmeTotal::kPerception);

// 100 * mean(method[i] / full[i]). Sizes must match and be non-empty; full[i] must not be 0.
double retention_average(const std::vector<double>& method, const std::vector<double>& full);

struct RetentionRow {
  std::string method;
  std::vector<std::optional<double>> scores;    // per benchmark, nullopt = not in this method's file
  std::vector<std::optional<double>> relative;  // score / reference, in %
  std::optional<double> average;                // Avg. (%) over the benchmarks present
  size_t used = 0;                              // how many benchmarks entered the average
};

struct RetentionTable {
  std::vector<std::string> benchmarks;
  std::string reference_name;
  std::vector<double> reference;
  std::vector<RetentionRow> rows;
  MmeTotal mme = MmeTotal::kPerception;
  // Benchmarks the reference scored 0 on: no ratio exists, so they are shown but left out of
  // every Avg. (%) (a broken run of one benchmark must not hide the whole table).
  std::vector<std::string> zero_reference;
  size_t usable() const { return benchmarks.size() - zero_reference.size(); }
};

// `benchmarks` empty: every benchmark of the reference, in the papers' column order (vqav2, gqa,
// sqa, textvqa, pope, mme, mmbench, mmbench_cn, mmvet, then the rest by name). Every listed
// benchmark must be in the reference; one it scored 0 on is listed in zero_reference (at least one
// must be non-zero).
RetentionTable retention(const MethodScores& reference, const std::vector<MethodScores>& methods,
                         const std::vector<std::string>& benchmarks = {}, MmeTotal mme = MmeTotal::kPerception);

std::string format_retention(const RetentionTable& table);
// The table's footnote for zero_reference ("" when there is none).
std::string zero_reference_note(const RetentionTable& table);
std::string retention_json(const RetentionTable& table);

}  // namespace era::score
