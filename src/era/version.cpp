#include "era/version.h"

namespace era {

Version version() { return {ERA_VERSION_MAJOR, ERA_VERSION_MINOR, ERA_VERSION_PATCH}; }
const char* version_string() { return ERA_VERSION_STRING; }

}  // namespace era
