#pragma once
// Where a chat message's image comes from (its image_url.url): a data: URL carried in the
// request, or a local file (a path or a file:// URL) inside one of the folders the operator
// allowed with --allow-dir. Remote http(s) URLs are refused: the server never fetches anything.
#include <cstdint>
#include <string>
#include <vector>

#include "era/image.h"

namespace era::server {

class ImageSourcePolicy {
 public:
  // The folders local images may come from; each must exist (canonicalised here, symbolic links
  // resolved, so a link inside an allowed folder cannot lead out of it). Throws era::Error
  // (kInvalidArgument) naming a folder that does not exist.
  explicit ImageSourcePolicy(const std::vector<std::string>& allowed_dirs = {});
  const std::vector<std::string>& allowed_dirs() const { return allowed_; }

  // The image `url` stands for. `field` names the item in errors
  // ("messages[0].content[1].image_url.url"). Throws ApiError: 400 for a malformed data URL, an
  // unsupported scheme, a relative path or a missing file; 403 for a path outside the allowed
  // folders (or any local path when none is allowed) and for http(s) URLs.
  Image resolve(const std::string& url, const std::string& field) const;

 private:
  Image local_file(const std::string& path, const std::string& field) const;
  std::vector<std::string> allowed_;
};

// The bytes of a data: URL's payload ("data:image/png;base64,...."). Throws ApiError(400) naming
// `field` unless it is a base64 data URL of an image/* media type.
std::string decode_data_url(const std::string& url, const std::string& field);

inline constexpr uint64_t kMaxImageFileBytes = uint64_t{256} << 20;

}  // namespace era::server
