// Local images stay inside --allow-dir however the folder changes while they are read: the
// descriptor-relative open (server/beneath_open.h) on both of its ways (openat2, and the
// O_NOFOLLOW walk used where openat2 is missing), and the policy built on it, including a
// symbolic link swapped in between the check of the name and the open, and a thread swapping one
// back and forth under racing requests.
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>
#include <vector>

#include "apps/server/api_error.h"
#include "apps/server/beneath_open.h"
#include "apps/server/image_source.h"
#include "test_support.h"

namespace era::server {
namespace {

namespace fs = std::filesystem;

std::string sample_png_bytes() { return test::read_file(test::source_dir() + "/tests/data/sample.png"); }
// A PNG too (decoders ignore what follows IEND), told apart by its tail: whatever the request
// path, these bytes must never come back.
std::string secret_bytes() { return sample_png_bytes() + "SECRET-OUTSIDE-THE-ALLOWED-FOLDER"; }

// root/allowed: in.png, real/a.png, inside_link -> real, out_link -> ../outside,
//   abs_link -> <root>/outside (absolute), file_link -> ../outside/a.png, fifo
// root/outside/a.png: the secret
struct Tree {
  std::string root, allowed, outside;
  Tree() {
    root = test::scratch_dir_for_this_test();
    allowed = root + "/allowed";
    outside = root + "/outside";
    fs::create_directories(allowed + "/real");
    fs::create_directories(outside);
    test::write_file(allowed + "/in.png", sample_png_bytes());
    test::write_file(allowed + "/real/a.png", sample_png_bytes());
    test::write_file(outside + "/a.png", secret_bytes());
    fs::create_directory_symlink("real", allowed + "/inside_link");
    fs::create_directory_symlink("../outside", allowed + "/out_link");
    fs::create_directory_symlink(outside, allowed + "/abs_link");
    fs::create_symlink("../outside/a.png", allowed + "/file_link");
    EXPECT_EQ(::mkfifo((allowed + "/fifo").c_str(), 0600), 0);
  }
};

// open_beneath's result: the bytes read, or the error as "E<errno>".
std::string open_result(int dir_fd, const std::string& relative, BeneathMode mode) {
  const int fd = open_beneath(dir_fd, relative, O_RDONLY | O_NONBLOCK, mode);
  if (fd < 0) return "E" + std::to_string(-fd);
  std::string data;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) data.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return data;
}

std::string err(int e) { return "E" + std::to_string(e); }

class OpenBeneath : public ::testing::TestWithParam<BeneathMode> {};

TEST_P(OpenBeneath, OpensInsideAndRefusesEveryWayOut) {
  const BeneathMode mode = GetParam();
  const bool openat2 = mode == BeneathMode::kAuto && openat2_available();
  RecordProperty("openat2", openat2 ? "yes" : "no");
  const Tree t;
  const int dir = ::open(t.allowed.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  const std::string png = sample_png_bytes();
  EXPECT_EQ(open_result(dir, "in.png", mode), png);
  EXPECT_EQ(open_result(dir, "real/a.png", mode), png);
  EXPECT_EQ(open_result(dir, "./real//./a.png", mode), png);
  EXPECT_EQ(open_result(dir, "real/../in.png", mode), png);  // ".." that stays inside
  // Out: ".." above the folder, absolute paths, links leading out (relative, absolute, as a
  // folder or as the file itself). openat2 says EXDEV; the walk refuses every link with ELOOP.
  const std::string out_link = openat2 ? err(EXDEV) : err(ELOOP);
  const std::vector<std::string> escapes = {"../outside/a.png", "real/../../outside/a.png", "..", "/etc/passwd",
                                            t.outside + "/a.png"};
  for (const std::string& path : escapes) EXPECT_EQ(open_result(dir, path, mode), err(EXDEV)) << path;
  EXPECT_EQ(open_result(dir, "out_link/a.png", mode), out_link);
  EXPECT_EQ(open_result(dir, "abs_link/a.png", mode), out_link);
  EXPECT_EQ(open_result(dir, "file_link", mode), out_link);
  EXPECT_EQ(open_result(dir, "real/../out_link/a.png", mode), out_link);
  // A link that stays inside: followed by openat2, refused by the walk (stricter, never looser).
  EXPECT_EQ(open_result(dir, "inside_link/a.png", mode), openat2 ? png : err(ELOOP));
  // O_PATH (the policy's first, checking open) refuses the same links: the walk must not hand
  // back a descriptor of the link itself.
  const int link_ref = open_beneath(dir, "file_link", O_PATH, mode);
  EXPECT_EQ(link_ref, openat2 ? -EXDEV : -ELOOP);
  if (link_ref >= 0) ::close(link_ref);
  EXPECT_EQ(open_result(dir, "missing.png", mode), err(ENOENT));
  EXPECT_EQ(open_result(dir, "in.png/x", mode), err(ENOTDIR));
  EXPECT_EQ(open_result(dir, "missing/../in.png", mode), err(ENOENT));
  ::close(dir);
}

INSTANTIATE_TEST_SUITE_P(BothWays, OpenBeneath, ::testing::Values(BeneathMode::kAuto, BeneathMode::kWalkOnly),
                         [](const auto& info) { return info.param == BeneathMode::kAuto ? "Auto" : "WalkOnly"; });

class ImageSource : public ::testing::TestWithParam<BeneathMode> {};

// What resolve() gives for `path`: the bytes, or "403" / "400".
std::string resolved(const ImageSourcePolicy& policy, const std::string& path) {
  try {
    const Image image = policy.resolve(path, "f");
    return std::string(reinterpret_cast<const char*>(image.data()), image.size_bytes());
  } catch (const ApiError& e) {
    return std::to_string(e.status());
  }
}

TEST_P(ImageSource, AllowedFolderRules) {
  const Tree t;
  const ImageSourcePolicy policy({t.allowed}, GetParam());
  const std::string png = sample_png_bytes();
  EXPECT_EQ(resolved(policy, t.allowed + "/in.png"), png);
  EXPECT_EQ(resolved(policy, "file://" + t.allowed + "/real/a.png"), png);
  // A link inside that stays inside: its target's name is what is opened (either way).
  EXPECT_EQ(resolved(policy, t.allowed + "/inside_link/a.png"), png);
  // Out, however spelled: 403, the same whether a file is there or not.
  for (const std::string& path :
       {t.allowed + "/out_link/a.png", t.allowed + "/abs_link/a.png", t.allowed + "/file_link", t.allowed + "/../outside/a.png",
        t.allowed + "/out_link/missing.png", t.allowed + "/../outside/missing.png", t.outside + "/a.png"})
    EXPECT_EQ(resolved(policy, path), "403") << path;
  // Inside but not a readable image file: 400, and a FIFO does not block.
  EXPECT_EQ(resolved(policy, t.allowed + "/missing.png"), "400");
  EXPECT_EQ(resolved(policy, t.allowed), "400");
  EXPECT_EQ(resolved(policy, t.allowed + "/real"), "400");
  EXPECT_EQ(resolved(policy, t.allowed + "/fifo"), "400");
  // Over the size limit: a sparse file, nothing written.
  const std::string big = t.allowed + "/big.png";
  test::write_file(big, "");
  fs::resize_file(big, kMaxImageFileBytes + 1);
  try {
    policy.resolve(big, "messages[0].content[1].image_url.url");
    FAIL() << "a file over the limit was read";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages[0].content[1].image_url.url");
    EXPECT_NE(std::string(e.what()).find("more than the"), std::string::npos) << e.what();
  }
}

TEST_P(ImageSource, AnAllowedFolderGivenAsALinkWorksBothSpellings) {
  const Tree t;
  fs::create_directory_symlink(t.allowed, t.root + "/allowed_link");
  const ImageSourcePolicy policy({t.root + "/allowed_link"}, GetParam());
  ASSERT_EQ(policy.allowed_dirs().size(), 1u);
  EXPECT_EQ(policy.allowed_dirs()[0], fs::canonical(t.allowed).string());
  EXPECT_EQ(resolved(policy, t.root + "/allowed_link/in.png"), sample_png_bytes());
  EXPECT_EQ(resolved(policy, t.allowed + "/in.png"), sample_png_bytes());
  EXPECT_EQ(resolved(policy, t.root + "/allowed_link/out_link/a.png"), "403");
}

// The race of issue 51, made deterministic: the name is checked while allowed/x is a real
// folder, then x becomes a link to outside before the open. A check of the name followed by an
// open of the name (era_server before this) reads the outside file here; the open beneath the
// folder's descriptor must refuse it.
TEST_P(ImageSource, ALinkSwappedInAfterTheCheckIsRefused) {
  const Tree t;
  fs::create_directories(t.allowed + "/x");
  test::write_file(t.allowed + "/x/a.png", sample_png_bytes());
  const ImageSourcePolicy policy({t.allowed}, GetParam());
  const std::string path = t.allowed + "/x/a.png";
  const ImageSourcePolicy::Located where = policy.locate(path, "f");
  EXPECT_EQ(where.relative, "x/a.png");
  EXPECT_EQ(policy.read(where, path, "f"), sample_png_bytes());  // untouched: read

  fs::rename(t.allowed + "/x", t.allowed + "/x_was");
  fs::create_directory_symlink(t.outside, t.allowed + "/x");
  try {
    const std::string bytes = policy.read(where, path, "f");
    ADD_FAILURE() << "read " << bytes.size() << " bytes through a link to outside"
                  << (bytes == secret_bytes() ? " (the outside file)" : "");
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 403) << e.what();
    EXPECT_NE(std::string(e.what()).find("not inside an allowed folder"), std::string::npos) << e.what();
  }
  // The same for a file swapped for a link to outside.
  fs::remove(t.allowed + "/x");
  fs::rename(t.allowed + "/x_was", t.allowed + "/x");
  fs::remove(t.allowed + "/x/a.png");
  fs::create_symlink(t.outside + "/a.png", t.allowed + "/x/a.png");
  EXPECT_THROW(policy.read(where, path, "f"), ApiError);
  // And the allowed folder itself replaced by a link to outside after startup: the descriptor
  // opened at startup still names the original folder, so what is read is the original in.png.
  const ImageSourcePolicy::Located in = policy.locate(t.allowed + "/in.png", "f");
  test::write_file(t.outside + "/in.png", secret_bytes());
  fs::rename(t.allowed, t.root + "/allowed_moved");
  fs::create_directory_symlink(t.outside, t.allowed);
  EXPECT_EQ(policy.read(in, t.allowed + "/in.png", "f"), sample_png_bytes());
  EXPECT_EQ(resolved(policy, t.allowed + "/in.png"), "403");  // the name now leads outside
}

// The race as issue 51 found it (5 of 400 requests read the outside file): a thread exchanges
// allowed/x (a folder holding a.png) with a link to a folder outside holding a secret a.png,
// while requests resolve allowed/x/a.png. Each request gets the inside image or a refusal,
// never the secret.
TEST_P(ImageSource, RacingRequestsNeverReadOutside) {
  const Tree t;
  fs::create_directories(t.allowed + "/x");
  test::write_file(t.allowed + "/x/a.png", sample_png_bytes());
  fs::create_directory_symlink(t.outside, t.allowed + "/y");
  const ImageSourcePolicy policy({t.allowed}, GetParam());
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    const std::string x = t.allowed + "/x", y = t.allowed + "/y";
    while (!stop.load()) ::renameat2(AT_FDCWD, x.c_str(), AT_FDCWD, y.c_str(), RENAME_EXCHANGE);
  });
  int inside = 0, refused = 0, outside = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string r = resolved(policy, t.allowed + "/x/a.png");
    if (r == secret_bytes()) ++outside;
    else if (r == sample_png_bytes()) ++inside;
    else ++refused;
  }
  stop = true;
  flipper.join();
  RecordProperty("inside", inside);
  RecordProperty("refused", refused);
  EXPECT_EQ(outside, 0) << inside << " inside, " << refused << " refused";
}

INSTANTIATE_TEST_SUITE_P(BothWays, ImageSource, ::testing::Values(BeneathMode::kAuto, BeneathMode::kWalkOnly),
                         [](const auto& info) { return info.param == BeneathMode::kAuto ? "Auto" : "WalkOnly"; });

}  // namespace
}  // namespace era::server
