#include "model/export_compat.h"

#include <array>
#include <cctype>

#include "era/error.h"
#include "util/compat.h"

namespace era {
namespace {

// The torch versions tools/export_llava.py exports with (its table EXPORT_TORCH in
// tools/era_tools/torch_versions.py), whose math bundles were measured to run on both LibTorch
// 1.13 and 2.11. Any other exporter version newer than the running LibTorch is an untested pair.
constexpr std::array<std::array<int, 2>, 2> kTestedExporters{{{1, 13}, {2, 11}}};

// scaled_dot_product_attention with the `scale=` argument the sdpa decoder passes.
constexpr TorchVersion kSdpaSince{2, 1};

bool older(const TorchVersion& a, const TorchVersion& b) { return a.major != b.major ? a.major < b.major : a.minor < b.minor; }

bool tested_exporter(const TorchVersion& v) {
  for (const auto& t : kTestedExporters) {
    if (t[0] == v.major && t[1] == v.minor) return true;
  }
  return false;
}

std::string tested_list() {
  std::string s;
  for (size_t i = 0; i < kTestedExporters.size(); ++i) {
    if (i) s += i + 1 == kTestedExporters.size() ? " or " : ", ";
    s += std::to_string(kTestedExporters[i][0]) + "." + std::to_string(kTestedExporters[i][1]) + ".x";
  }
  return s;
}

// Reads the leading decimal number at `pos`, advancing it; -1 when there is none.
int read_number(const std::string& s, size_t& pos) {
  const size_t start = pos;
  int value = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])) && pos - start < 6)
    value = value * 10 + (s[pos++] - '0');
  return pos == start ? -1 : value;
}

}  // namespace

TorchVersion libtorch_version() { return {compat::kLibTorchMajor, compat::kLibTorchMinor}; }

std::optional<TorchVersion> parse_torch_version(const std::string& text) {
  size_t pos = 0;
  const int major = read_number(text, pos);
  if (major < 0 || pos >= text.size() || text[pos] != '.') return std::nullopt;
  ++pos;
  const int minor = read_number(text, pos);
  if (minor < 0) return std::nullopt;
  return TorchVersion{major, minor};
}

void check_export_compat(const Manifest& m, const std::string& bundle_dir, const TorchVersion& running) {
  const std::string where = "bundle " + bundle_dir + ": ";
  const auto exported = parse_torch_version(m.exported_torch);
  if (!exported) {
    throw Error(ErrorCode::kBundle, where + "manifest field exported_with.torch is \"" + m.exported_torch +
                                        "\", not a torch version; re-export it with tools/export_llava.py");
  }
  const std::string origin = "exported with torch " + m.exported_torch + " (manifest exported_with.torch)";
  if (m.attention == "sdpa" && older(running, kSdpaSince)) {
    throw Error(ErrorCode::kBundle,
                where + origin + " with --attention sdpa: its decoder calls aten::scaled_dot_product_attention, " +
                    "which this build's LibTorch " + running.str() + " does not have (it needs LibTorch >= " + kSdpaSince.str() +
                    "); re-export it with --attention math (torch " + tested_list() +
                    "), or use an era built against LibTorch >= " + kSdpaSince.str());
  }
  if (older(running, *exported) && !tested_exporter(*exported)) {
    throw Error(ErrorCode::kBundle,
                where + origin + ", newer than this build's LibTorch " + running.str() +
                    ": TorchScript files from a newer torch may call operators an older LibTorch lacks, and " +
                    "this pair is untested; re-export it with torch " + tested_list() + " (tools/export_llava.py)");
  }
}

}  // namespace era
