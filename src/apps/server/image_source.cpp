#include "apps/server/image_source.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "apps/server/api_error.h"
#include "era/error.h"
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

// A descriptor closed when it goes out of scope.
struct OwnedFd {
  int fd;
  explicit OwnedFd(int f) : fd(f) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

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
    throw ApiError(400, field + ": the data URL's media type must be image/*, got '" + url.substr(5, comma - 5) + "'", field);
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0)
    throw ApiError(400, field + ": only base64 data URLs are accepted (data:image/...;base64,...)", field);
  std::string bytes = decode_base64(url.substr(comma + 1), field);
  if (bytes.empty()) throw ApiError(400, field + ": the data URL holds no image bytes", field);
  return bytes;
}

ImageSourcePolicy::ImageSourcePolicy(const std::vector<std::string>& allowed_dirs, BeneathMode mode) : mode_(mode) {
  for (const auto& dir : allowed_dirs) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(dir, ec);
    if (ec || !fs::is_directory(canonical))
      throw Error(ErrorCode::kInvalidArgument, "--allow-dir " + dir + ": not an existing folder");
    const int fd = ::open(canonical.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw Error(ErrorCode::kInvalidArgument, "--allow-dir " + dir + ": cannot open: " + std::strerror(errno));
    folder_fds_.push_back(std::shared_ptr<const int>(new int(fd), [](const int* p) {
      ::close(*p);
      delete p;
    }));
    allowed_.push_back(canonical.string());
  }
}

ImageSourcePolicy::Located ImageSourcePolicy::locate(const std::string& path, const std::string& field) const {
  if (allowed_.empty())
    throw ApiError(403, field + ": local image files are not allowed on this server (start it with --allow-dir)", field);
  if (path.empty() || path[0] != '/')
    throw ApiError(400, field + ": a local image path must be absolute, got '" + path + "'", field);
  if (path.find('\0') != std::string::npos) throw ApiError(400, field + ": the path contains a NUL byte", field);
  // weakly_canonical resolves every link of the part that exists, so the folder found is where
  // the file is now; a missing file still gets a canonical spelling (refused by 403 if it would
  // be outside, so the answer never tells whether a file outside exists). What it finds may be
  // stale by the time read() opens it: read() trusts only the folder's descriptor.
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(fs::path(path), ec);
  if (!ec)
    for (size_t i = 0; i < allowed_.size(); ++i)
      if (is_within(real, fs::path(allowed_[i]))) return Located{i, real.lexically_relative(allowed_[i]).string()};
  throw ApiError(403, field + ": " + path + " is not inside an allowed folder", field);
}

std::string ImageSourcePolicy::read(const Located& where, const std::string& path, const std::string& field) const {
  const ApiError outside(403, field + ": " + path + " is not inside an allowed folder", field);
  if (where.folder >= folder_fds_.size()) throw outside;
  const int dir_fd = *folder_fds_[where.folder];
  const std::string what = field + ": image " + path + ": ";
  const auto refuse_open = [&](int err) -> ApiError {
    // A step out of the folder (EXDEV), or a symbolic link the fallback walk does not follow
    // (ELOOP): the same 403 as a path outside, saying nothing of what is there.
    if (err == EXDEV || err == ELOOP) return outside;
    if (err == ENOENT || err == ENOTDIR) return ApiError(400, what + "not found", field);
    return ApiError(400, what + "cannot open: " + std::strerror(err), field);
  };
  const auto check = [&](const struct stat& st) {
    if (!S_ISREG(st.st_mode)) throw ApiError(400, what + "is " + file_kind(st.st_mode) + ", not a file", field);
    if (static_cast<uint64_t>(st.st_size) > kMaxImageFileBytes)
      throw ApiError(
          400,
          what + "is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(kMaxImageFileBytes) + " allowed",
          field);
  };
  // First a reference only (O_PATH opens nothing: a FIFO does not block, a device is not
  // touched), checked; then the same walk again for reading, which must reach the same file (a
  // swap in between is refused before anything is read).
  struct stat seen {};
  {
    const OwnedFd ref(open_beneath(dir_fd, where.relative, O_PATH, mode_));
    if (ref.fd < 0) throw refuse_open(-ref.fd);
    if (::fstat(ref.fd, &seen) != 0) throw refuse_open(errno);
    check(seen);
  }
  const OwnedFd file(open_beneath(dir_fd, where.relative, O_RDONLY | O_NONBLOCK | O_NOCTTY, mode_));
  if (file.fd < 0) throw refuse_open(-file.fd);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw refuse_open(errno);
  if (st.st_dev != seen.st_dev || st.st_ino != seen.st_ino) throw ApiError(400, what + "was replaced while being opened", field);
  check(st);
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(file.fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ApiError(400, what + "read failed: " + std::strerror(errno), field);
    if (n == 0) break;  // shrank while being read: what is there
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

Image ImageSourcePolicy::local_file(const std::string& path, const std::string& field) const {
  // Read now, so the file cannot be swapped for something else between this and the generation.
  const std::string bytes = read(locate(path, field), path, field);
  return Image::from_encoded(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

Image ImageSourcePolicy::resolve(const std::string& url, const std::string& field) const {
  const std::string scheme = lowercase(url.substr(0, std::min<size_t>(url.size(), 8)));
  if (starts_with(scheme, "data:")) {
    const std::string bytes = decode_data_url(url, field);
    return Image::from_encoded(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), field);
  }
  if (starts_with(scheme, "http://") || starts_with(scheme, "https://"))
    throw ApiError(403, field + ": remote image URLs are not fetched by this server; send the image as a data: URL", field);
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
  throw ApiError(400, field + ": not an image URL (a data: URL, or an absolute path / file:// URL under --allow-dir)", field);
}

}  // namespace era::server
