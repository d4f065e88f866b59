#pragma once
// Where a chat message's image comes from (its image_url.url): a data: URL carried in the
// request, or a local file (a path or a file:// URL) inside one of the folders the operator
// allowed with --allow-dir. Remote http(s) URLs are refused: the server never fetches anything.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/server/beneath_open.h"
#include "era/image.h"

namespace era::server {

class ImageSourcePolicy {
 public:
  // The folders local images may come from; each must exist. Each is canonicalised (symbolic
  // links resolved, so an --allow-dir that is itself a link works) and opened once, here: every
  // file is later opened relative to that descriptor (server/beneath_open.h), so nothing done
  // inside a folder afterwards (a folder swapped for a link to outside, even mid-request) can
  // lead a read out of it. `mode`: kWalkOnly forces the O_NOFOLLOW walk (tests). Throws
  // era::Error (kInvalidArgument) naming a folder that does not exist or cannot be opened.
  explicit ImageSourcePolicy(const std::vector<std::string>& allowed_dirs = {}, BeneathMode mode = BeneathMode::kAuto);
  const std::vector<std::string>& allowed_dirs() const { return allowed_; }

  // The image `url` stands for. `field` names the item in errors
  // ("messages[0].content[1].image_url.url"). Throws ApiError: 400 for a malformed data URL, an
  // unsupported scheme, a relative path, a missing file or one that is not a regular file; 403
  // for a path outside the allowed folders (or any local path when none is allowed) and for
  // http(s) URLs. A path outside is a 403 whether or not a file is there, so the answer never
  // tells what exists outside.
  Image resolve(const std::string& url, const std::string& field) const;

  // The two steps of reading a local file `path`, public so that tests can change the folders
  // between them (the race they must withstand).
  struct Located {
    size_t folder = 0;     // index into allowed_dirs()
    std::string relative;  // the path inside it, as its names resolve now ("." for the folder itself)
  };
  // By name: which allowed folder `path` is in, symbolic links resolved as they are now. This is
  // only where to look; nothing is trusted from it. Throws ApiError (400 malformed, 403 outside).
  Located locate(const std::string& path, const std::string& field) const;
  // By descriptor: opens `where.relative` beneath the folder's descriptor, refusing any step out
  // of it (403), and reads it if the opened file is a regular file of at most
  // kMaxImageFileBytes (else 400). Opening never blocks (FIFOs) and a device is never read: the
  // file is first opened as a mere reference (O_PATH) and checked, then opened again for reading
  // and required to be the same file. `path` is for messages.
  std::string read(const Located& where, const std::string& path, const std::string& field) const;

 private:
  Image local_file(const std::string& path, const std::string& field) const;
  std::vector<std::string> allowed_;
  std::vector<std::shared_ptr<const int>> folder_fds_;  // one a folder, closed with the last copy
  BeneathMode mode_ = BeneathMode::kAuto;
};

// The bytes of a data: URL's payload ("data:image/png;base64,...."). Throws ApiError(400) naming
// `field` unless it is a base64 data URL of an image/* media type.
std::string decode_data_url(const std::string& url, const std::string& field);

inline constexpr uint64_t kMaxImageFileBytes = uint64_t{256} << 20;

}  // namespace era::server
