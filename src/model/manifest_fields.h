#pragma once
// Internal header. Checked reads of manifest.json fields, shared by the common manifest
// (model/manifest.cpp) and the families' own sections (family/<name>/): every value is checked for
// type and range, and every refusal is one era::Error(kBundle) "WHERE: field = value: rule" naming
// the field from the manifest's root ("image.grid_pinpoints[0][1]"), whichever parser read it.
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace era {

class ManifestFields {
 public:
  // `root`: the whole manifest (it must outlive this reader); `where`: the file, for messages.
  ManifestFields(const nlohmann::json& root, std::string where);

  const std::string& where() const { return where_; }
  // The node at "a.b.c", or nullptr when a key on the way is absent.
  const nlohmann::json* find(const std::string& dotted) const;
  const nlohmann::json& at(const std::string& dotted) const;  // refused when absent

  // An integer in [lo, hi]: floats (2.0 included), booleans, strings and integers beyond int64
  // are refused, never converted.
  int64_t integer(const std::string& dotted, int64_t lo, int64_t hi) const;
  int64_t integer_or(const std::string& dotted, int64_t lo, int64_t hi, int64_t fallback) const;
  int64_t integer_value(const nlohmann::json& v, const std::string& dotted, int64_t lo, int64_t hi) const;
  // A list of 1 to max_items integers in [lo, hi].
  std::vector<int64_t> integers(const nlohmann::json& v, const std::string& dotted, int64_t lo, int64_t hi,
                                size_t max_items) const;
  std::string text(const std::string& dotted) const;
  std::string text_or(const std::string& dotted, const std::string& fallback) const;
  bool flag_or(const std::string& dotted, bool fallback) const;
  // An optional number in (0, hi]; `fallback` when absent.
  double positive_number_or(const std::string& dotted, double hi, double fallback) const;
  // Three finite numbers of magnitude at most 1e6, each passing `ok` (else refused with `rule`).
  std::array<float, 3> three_numbers(const std::string& dotted, const std::function<bool(double)>& ok,
                                     const std::string& rule) const;
  // An image processor's per-channel mean and std (std >= 1e-6: pixels are divided by it).
  std::array<float, 3> channel_means(const std::string& dotted) const;
  std::array<float, 3> channel_stds(const std::string& dotted) const;

  // Refusals: "WHERE: field = value: rule", and "WHERE: what".
  [[noreturn]] void bad(const std::string& dotted, const nlohmann::json& value, const std::string& rule) const;
  void require(bool ok, const std::string& what) const;

 private:
  const nlohmann::json& root_;
  std::string where_;
};

// A value as a message shows it: one short line.
std::string shown_json(const nlohmann::json& v);

}  // namespace era
