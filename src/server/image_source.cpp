#include "server/image_source.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <filesystem>
#include <memory>

#include "server/api_error.h"
#include "util/input_file.h"

namespace era::server {
namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `path` (canonical) is `dir` (canonical) or inside it: compared by whole path components, so
// /data/images2 is not inside /data/images.
bool is_within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

// Base64 through OpenSSL's decoder (EVP_Decode*, which also handles the padding and rejects
// characters outside the alphabet).
std::string decode_base64(const std::string& text, const std::string& field) {
  std::unique_ptr<EVP_ENCODE_CTX, void (*)(EVP_ENCODE_CTX*)> ctx(EVP_ENCODE_CTX_new(), EVP_ENCODE_CTX_free);
  if (!ctx) throw ApiError(500, "out of memory decoding " + field);
  std::string out(text.size() / 4 * 3 + 3, '\0');
  EVP_DecodeInit(ctx.get());
  int written = 0, tail = 0;
  // EVP_DecodeUpdate takes an int length: feed large payloads in slices (a multiple of 4).
  size_t total = 0;
  const size_t kSlice = size_t{1} << 30;
  for (size_t at = 0; at < text.size(); at += kSlice) {
    const int len = static_cast<int>(std::min(kSlice, text.size() - at));
    if (EVP_DecodeUpdate(ctx.get(), reinterpret_cast<unsigned char*>(&out[total]), &written,
                         reinterpret_cast<const unsigned char*>(text.data() + at), len) < 0)
      throw ApiError(400, field + ": the data URL's payload is not valid base64", field);
    total += static_cast<size_t>(written);
  }
  if (EVP_DecodeFinal(ctx.get(), reinterpret_cast<unsigned char*>(&out[total]), &tail) < 0)
    throw ApiError(400, field + ": the data URL's payload is not valid base64 (truncated)", field);
  out.resize(total + static_cast<size_t>(tail));
  return out;
}

}  // namespace

std::string decode_data_url(const std::string& url, const std::string& field) {
  // data:[<media type>][;base64],<data>
  const size_t comma = url.find(',');
  if (!starts_with(lowercase(url.substr(0, 5)), "data:") || comma == std::string::npos)
    throw ApiError(400, field + ": not a data URL (expected data:image/...;base64,...)", field);
  const std::string header = lowercase(url.substr(5, comma - 5));
  if (!starts_with(header, "image/"))
    throw ApiError(400, field + ": the data URL's media type must be image/*, got '" + url.substr(5, comma - 5) + "'",
                   field);
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0)
    throw ApiError(400, field + ": only base64 data URLs are accepted (data:image/...;base64,...)", field);
  std::string bytes = decode_base64(url.substr(comma + 1), field);
  if (bytes.empty()) throw ApiError(400, field + ": the data URL holds no image bytes", field);
  return bytes;
}

ImageSourcePolicy::ImageSourcePolicy(const std::vector<std::string>& allowed_dirs) {
  for (const auto& dir : allowed_dirs) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(dir, ec);
    if (ec || !fs::is_directory(canonical))
      throw Error(ErrorCode::kInvalidArgument, "--allow-dir " + dir + ": not an existing folder");
    allowed_.push_back(canonical.string());
  }
}

Image ImageSourcePolicy::local_file(const std::string& path, const std::string& field) const {
  if (allowed_.empty())
    throw ApiError(403, field + ": local image files are not allowed on this server (start it with --allow-dir)", field);
  if (path.empty() || path[0] != '/')
    throw ApiError(400, field + ": a local image path must be absolute, got '" + path + "'", field);
  if (path.find('\0') != std::string::npos) throw ApiError(400, field + ": the path contains a NUL byte", field);
  // weakly_canonical resolves every link of the part that exists, so the check below sees where
  // the file really is; a missing file still gets a canonical spelling (refused by 403 if it
  // would be outside, so the answer never tells whether a file outside exists).
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(fs::path(path), ec);
  if (ec) throw ApiError(403, field + ": " + path + " is not inside an allowed folder", field);
  bool allowed = false;
  for (const auto& dir : allowed_) allowed = allowed || is_within(real, fs::path(dir));
  if (!allowed) throw ApiError(403, field + ": " + path + " is not inside an allowed folder", field);
  // Read now, through the checked reader (regular file, bounded size, never blocks), so the
  // file cannot be swapped for something else between this check and the generation.
  std::string bytes;
  try {
    bytes = read_input_file(real.string(), field + ": image", kMaxImageFileBytes);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), field);
  }
  return Image::from_encoded(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

Image ImageSourcePolicy::resolve(const std::string& url, const std::string& field) const {
  const std::string scheme = lowercase(url.substr(0, std::min<size_t>(url.size(), 8)));
  if (starts_with(scheme, "data:")) {
    const std::string bytes = decode_data_url(url, field);
    return Image::from_encoded(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), field);
  }
  if (starts_with(scheme, "http://") || starts_with(scheme, "https://"))
    throw ApiError(403, field + ": remote image URLs are not fetched by this server; send the image as a data: URL",
                   field);
  if (starts_with(scheme, "file://")) {
    // file:///abs/path or file://localhost/abs/path, percent-encoded.
    std::string rest = url.substr(7);
    if (starts_with(lowercase(rest), "localhost/")) rest = rest.substr(9);
    if (!starts_with(rest, "/")) throw ApiError(400, field + ": a file URL must name a local absolute path", field);
    return local_file(httplib::detail::decode_url(rest, false), field);
  }
  if (starts_with(url, "/")) return local_file(url, field);
  const size_t colon = url.find(':');
  if (colon != std::string::npos && colon < 16 && url.find('/') > colon)
    throw ApiError(400, field + ": unsupported URL scheme '" + url.substr(0, colon) + "' (use a data: URL)", field);
  throw ApiError(400, field + ": not an image URL (a data: URL, or an absolute path / file:// URL under --allow-dir)",
                 field);
}

}  // namespace era::server
