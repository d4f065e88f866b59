// era_server's request parser on a whole POST /v1/chat/completions body, as the server runs it
// (server/openai_request.h): the JSON, every field's checks, the era extension, data: URLs and
// their base64, absolute paths and file:// URLs resolved against one allowed folder.
//
// The inputs may write "@ALLOWED@" and "@OUTSIDE@" for the two folders below (the placeholders
// are replaced before parsing), so the seeds and the fuzzer can name real files wherever TMPDIR
// is: allowed/ holds a.png, sub/b.png, a FIFO, a link that stays inside and links that lead out;
// outside/ holds secret.png.
//
// Refusals are fine: ApiError 400 or 403, era::Error. Findings, besides crashes and sanitizer
// reports: any other ApiError status (a 500 is the server blaming itself for a bad request), any
// other exception, the secret's bytes coming back as an image, and the two ways of opening
// beneath the allowed folder (openat2, the O_NOFOLLOW walk) answering one body differently, and
// descriptors left open (each error path of those opens closes what it opened).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "apps/server/api_error.h"
#include "apps/server/openai_request.h"
#include "era/error.h"
#include "fuzz_targets.h"

namespace {

namespace fs = std::filesystem;

const char kSecret[] = "\x89PNG\r\n\x1a\nSECRET, OUTSIDE THE ALLOWED FOLDER";

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) __builtin_trap();  // the harness itself failed, not the parser
}

struct Folders {
  std::string allowed, outside;
  std::unique_ptr<era::server::ImageSourcePolicy> beneath, walk;

  Folders() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string root = std::string(tmp && *tmp ? tmp : "/tmp") + "/era-fuzz-openai-request-" + std::to_string(::getpid());
    allowed = root + "/allowed";
    outside = root + "/outside";
    fs::remove_all(root);
    fs::create_directories(allowed + "/sub");
    fs::create_directories(outside);
    write(allowed + "/a.png", "\x89PNG\r\n\x1a\ninside a");
    write(allowed + "/sub/b.png", "\x89PNG\r\n\x1a\ninside b");
    write(outside + "/secret.png", std::string(kSecret, sizeof kSecret - 1));
    if (::mkfifo((allowed + "/fifo").c_str(), 0600) != 0) __builtin_trap();
    fs::create_directory_symlink("sub", allowed + "/in_link");
    fs::create_directory_symlink("../outside", allowed + "/out_link");
    fs::create_symlink(outside + "/secret.png", allowed + "/secret_link.png");
    beneath = std::make_unique<era::server::ImageSourcePolicy>(std::vector<std::string>{allowed});
    walk =
        std::make_unique<era::server::ImageSourcePolicy>(std::vector<std::string>{allowed}, era::server::BeneathMode::kWalkOnly);
  }
};

const Folders& folders() {
  static const Folders f;
  return f;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The lowest free descriptor: it climbs when descriptors leak. A margin, since libFuzzer may keep
// a file or two open itself; a leak on some path climbs past it within a few dozen inputs.
int lowest_free_fd() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) __builtin_trap();
  ::close(fd);
  return fd;
}

// The HTTP status the server would answer (200 for an accepted request).
int status_of(const std::string& body, const era::server::ImageSourcePolicy& policy) {
  try {
    const era::server::ChatRequest chat = era::server::parse_chat_request(body, era::Request{}, policy);
    for (const era::Image& image : chat.request.image_buffers)
      if (image.size_bytes() == sizeof kSecret - 1 && std::memcmp(image.data(), kSecret, sizeof kSecret - 1) == 0)
        __builtin_trap();  // read from outside the allowed folder
    return 200;
  } catch (const era::server::ApiError& e) {
    if (e.status() != 400 && e.status() != 403) __builtin_trap();  // bad input must never be a 5xx
    return e.status();
  } catch (const era::Error&) {
    return 400;
  }
}

}  // namespace

int era::fuzz::openai_request(const uint8_t* data, size_t size) {
  const Folders& f = folders();
  std::string body(reinterpret_cast<const char*>(data), size);
  replace_all(body, "@ALLOWED@", f.allowed);
  replace_all(body, "@OUTSIDE@", f.outside);
  if (status_of(body, *f.beneath) != status_of(body, *f.walk)) __builtin_trap();  // the two ways must agree here
  static const int first_free = lowest_free_fd();
  if (lowest_free_fd() > first_free + 16) __builtin_trap();  // descriptors leak
  return 0;
}
