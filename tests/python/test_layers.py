#!/usr/bin/env python3
"""The C++ sources' layers (docs/architecture.md, "Layers"), checked on the code:

  - the table lists every folder under src/ once, in layer order;
  - every #include "folder/..." of a file under src/ names its own folder or a lower layer's
    (an include against the order is an upward arrow; with none, the folders have no cycle);
  - a family folder (src/family/<name>/) includes family/ common files, never another family's
    folder, and nothing outside a family folder includes one but the registry;
  - every .cpp under src/ is listed by name in the top CMakeLists.txt (the library's and the
    apps' sources are listed, not globbed; the CUDA kernels src/kernels/*.cu are globbed).

    test_layers.py [REPO_ROOT] [unittest options]
"""
import pathlib
import re
import sys
import unittest

REPO = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                    else pathlib.Path(__file__).resolve().parents[2])
SRC = REPO / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".in"}


def layer_table(text):
    """[(layer number, folder name)] of the "## Layers" table, in the order written."""
    section = re.search(r"^## Layers\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        raise AssertionError("docs/architecture.md has no '## Layers' section")
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*`src/([a-z0-9_]+)/`\s*\|", section.group(1), re.M)
    return [(int(n), folder) for n, folder in rows]


def sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


def folder_of(rel):
    """The layer folder of a path under src/ ('kernels/cpu_gemv.h' -> 'kernels')."""
    return rel.split("/", 1)[0]


def family_of(rel):
    """'family/qwen2_5_vl/x.h' -> 'qwen2_5_vl'; None for family/ common files and elsewhere."""
    parts = rel.split("/")
    return parts[1] if parts[0] == "family" and len(parts) > 2 else None


def violations(layers, files):
    """The include lines that go against the layer order or the family rule, as messages."""
    order = {folder: n for n, folder in layers}
    out = []
    for path in files:
        rel = path.relative_to(SRC).as_posix()
        here = folder_of(rel)
        for target in INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
            there = folder_of(target)
            if there not in order or "/" not in target:
                continue  # a generated header, a sibling include, or outside src/
            if order[there] > order.get(here, -1):
                out.append(f"src/{rel} includes {target}: layer {order[there]} ({there}) above "
                           f"layer {order.get(here)} ({here})")
            theirs, mine = family_of(target), family_of(rel)
            if theirs and theirs != mine and rel != "family/registry.cpp":
                out.append(f"src/{rel} includes {target}: only family/{theirs}/ and the registry may")
    return out


class Layers(unittest.TestCase):
    def setUp(self):
        self.layers = layer_table((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))

    def test_table_lists_every_folder_once_in_order(self):
        numbers = [n for n, _ in self.layers]
        self.assertEqual(numbers, sorted(set(numbers)), "layer numbers must increase, one folder each")
        folders = [f for _, f in self.layers]
        on_disk = sorted(p.name for p in SRC.iterdir() if p.is_dir())
        self.assertEqual(sorted(folders), on_disk, "the Layers table and src/'s folders differ")

    def test_no_include_against_the_order(self):
        found = violations(self.layers, sources())
        self.assertEqual(found, [], "\n" + "\n".join(found))

    def test_the_check_sees_an_upward_arrow(self):
        # A file of a low layer including a high one, and a family including another family.
        probe = SRC / "util" / "layer_probe.h"
        family_probe = SRC / "family" / "llava15" / "layer_probe.h"
        try:
            probe.write_text('#include "pipeline/session_internals.h"\n')
            family_probe.write_text('#include "family/qwen2_5_vl/mrope_positions.h"\n')
            found = violations(self.layers, [probe, family_probe])
        finally:
            probe.unlink(missing_ok=True)
            family_probe.unlink(missing_ok=True)
        self.assertEqual(len(found), 2, found)

    def test_every_source_is_listed(self):
        cmake = (REPO / "CMakeLists.txt").read_text(encoding="utf-8")
        # the command-line tools: add_executable(${tool} src/apps/cli/${tool}.cpp) over a list
        tools = set()
        for names in re.findall(r"foreach\(tool ([^)]*)\)", cmake):
            if "src/apps/cli/${tool}.cpp" in cmake:
                tools.update(names.split())
        missing = [p.relative_to(REPO).as_posix() for p in SRC.rglob("*.cpp")
                   if p.relative_to(REPO).as_posix() not in cmake
                   and not (p.parent == SRC / "apps" / "cli" and p.stem in tools)]
        self.assertEqual(missing, [], "sources not listed in CMakeLists.txt: " + ", ".join(missing))


if __name__ == "__main__":
    unittest.main()
