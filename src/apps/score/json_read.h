#pragma once
// Internal to src/apps/eval/score (.cpp files only): reading JSON / JSONL ground-truth files with a
// clear era::Error for missing or malformed files, and keeping only the fields a scorer needs
// (the official annotation files are large; a filter keeps memory small).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace era::score::detail {

// keep(depth, key): whether the value under `key` (an object member at container depth `depth`,
// 1 = members of the top-level object) is kept. Null keeps everything.
using KeyFilter = std::function<bool(int depth, const std::string& key)>;

nlohmann::json read_json_file(const std::string& path, const std::string& what, const KeyFilter& keep = nullptr);

// Each non-blank line of a JSON Lines file, parsed, with where it is ("<what> <path> line N");
// a line that is not JSON, or not an object, is an era::Error naming that line.
void for_each_jsonl(const std::string& path, const std::string& what,
                    const std::function<void(const nlohmann::json&, const std::string& where)>& f);

// Python-like number/str view of a question id: strings verbatim, integers in decimal. Throws on
// anything else (`where` names the place).
std::string id_string(const nlohmann::json& v, const std::string& where);

}  // namespace era::score::detail
