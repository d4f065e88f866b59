#include "pipeline/error_boundary.h"

#include <torch/script.h>

#include <new>

#include "era/error.h"
#include "util/error_text.h"

namespace era {

std::function<bool(const std::string&)> relay_exceptions(const std::function<bool(const std::string&)>& on_text) {
  if (!on_text) return nullptr;
  return [&on_text](const std::string& piece) {
    try {
      return on_text(piece);
    } catch (...) {
      throw CallbackThrew{std::current_exception()};
    }
  };
}

void rethrow_as_era_error() {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const CallbackThrew& c) {
    std::rethrow_exception(c.error);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kRuntime, "model failed: " + error_summary(e.what()));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kRuntime, "out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kRuntime, std::string("internal failure: ") + error_summary(e.what()));
  } catch (...) {
    throw Error(ErrorCode::kRuntime, "internal failure of unknown type");
  }
}

}  // namespace era
