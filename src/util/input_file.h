#pragma once
// Reading a file that came from outside (a manifest, a question file, an options file, a
// tokenizer model): it must be a regular file of bounded size, and looking at it must never
// block. A FIFO, a device, a socket or a directory given where a file is expected is refused by
// name before it is opened for reading (opening a FIFO blocks until a writer appears; reading a
// device such as /dev/zero never ends).
#include <cstdint>
#include <string>

#include "era/error.h"

namespace era {

// What a file of this st_mode is, for messages: "a directory", "a FIFO (named pipe)", "a device",
// "a socket", or "not a regular file".
std::string file_kind(unsigned mode);

// Throws Error(code, "<what> <path>: <why>") unless `path` is a regular file (symbolic links
// followed) of at most `max_bytes`; returns its size. `what` names the item for the message,
// e.g. "question file" or "bundle /b: files.tokenizer".
uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes,
                          ErrorCode code = ErrorCode::kInvalidArgument);

// check_input_file, then the whole content. The file is opened non-blocking and checked again
// through the open descriptor, so a file swapped for a FIFO in between cannot block either.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes,
                            ErrorCode code = ErrorCode::kInvalidArgument);

}  // namespace era
