#include "era/error.h"

namespace era {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kImage: return "image error";
    case ErrorCode::kBundle: return "bundle error";
    case ErrorCode::kPrompt: return "prompt error";
    case ErrorCode::kRuntime: return "runtime error";
  }
  return "error";
}

}  // namespace era
