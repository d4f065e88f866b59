#pragma once
// Where the library finds libera_sentencepiece.so, the SentencePiece shim it dlopens (see
// src/text/sentencepiece_backend.h for why it is a separate object). Applications do not
// normally call anything here: the installed CMake package (era::era) defines
// ERA_INSTALLED_SHIM_DIR from its own location, so an install tree works wherever it is copied;
// era.pc puts the same folder on the executable's RUNPATH. The environment variable
// ERA_SENTENCEPIECE_SHIM (a file path) overrides every other place.
#include <string>

namespace era {

// Adds a folder to search (after $ERA_SENTENCEPIECE_SHIM and the executable's own folder). Only
// folders added before the first Session::open count: the shim is loaded once per process.
void add_sentencepiece_shim_dir(const std::string& dir);

// The shim file that was loaded (loading it now if needed); throws era::Error(kBundle) if none.
std::string sentencepiece_shim_path();

#ifdef ERA_INSTALLED_SHIM_DIR
namespace detail {
// Runs during static initialisation of any program including era.h through the package.
inline const bool installed_shim_dir_registered = (add_sentencepiece_shim_dir(ERA_INSTALLED_SHIM_DIR), true);
}  // namespace detail
#endif

}  // namespace era
