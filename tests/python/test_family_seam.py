#!/usr/bin/env python3
"""What a model family knows stays in src/family/ (docs/architecture.md, "Adding a model family").

Outside the family layer (src/family/: one folder per family, the code families share, the
registry), no C++ code (comments aside), the common manifest (src/model/manifest.*) included, may
name a family (its manifest `arch` as a string literal), branch on the image layout enum, or read a
family-only manifest field: anyres pinpoints and caps, the native-resolution sections, Qwen2.5-VL's
tower values (temporal patch, merge size, window, full-attention blocks, M-RoPE seconds), video
pooling and frame bounds, the vision markers, LLaVA-NeXT's image_newline.

KNOWN would list what has not moved yet, with the number of lines of each file (the test fails
when a file gains a line, a new leak, and when it loses one: shrink KNOWN with it); it is empty.

    test_family_seam.py [REPO_ROOT] [unittest options]
"""
import pathlib
import re
import sys
import unittest

REPO = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                    else pathlib.Path(__file__).resolve().parents[2])
SRC = REPO / "src"

ARCH_LITERAL = re.compile(r'"(llava-1\.5|llava-next|llava-onevision|qwen2\.5-vl)"')
LAYOUT_ENUM = re.compile(r"\bImageLayout\b")
FAMILY_FIELD = re.compile(
    r"\b(?:(?:image|video)\.native|grid_pinpoints|anyres_max_tiles|temporal_patch_size|spatial_merge_size"
    r"|tokens_per_second|fullatt_block_indexes|window_size|vision_start_id|vision_end_id|pool_stride"
    r"|image_newline|video\.(?:min_frames|max_frames|fps))\b")

# file (under src/) -> lines that still hold family knowledge, and why
KNOWN = {}


def allowed(rel):
    return rel.startswith("family/")


def code_lines(text):
    """(line number, code, code without string literals) with comments removed, lines kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    no_chars = re.sub(r"'(?:\\.|[^'\\])'", "''", text)
    no_strings = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', no_chars)
    return zip(range(1, text.count("\n") + 2), text.split("\n"), no_strings.split("\n"))


def leaks(paths):
    """{rel: [messages]} of family knowledge outside the family layer."""
    out = {}
    for path in paths:
        rel = path.relative_to(SRC).as_posix()
        if allowed(rel):
            continue
        for number, code, bare in code_lines(path.read_text(encoding="utf-8", errors="replace")):
            hits = ARCH_LITERAL.findall(code) + LAYOUT_ENUM.findall(bare) + FAMILY_FIELD.findall(bare)
            if hits:
                out.setdefault(rel, []).append(f"src/{rel}:{number}: {', '.join(hits)}: {code.strip()}")
    return out


def sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".h", ".cpp", ".cu") and p.is_file())


class FamilySeam(unittest.TestCase):
    def test_no_family_knowledge_outside_the_family_layer(self):
        found = leaks(sources())
        new = {rel: lines for rel, lines in found.items() if rel not in KNOWN}
        self.assertEqual(new, {}, "\n" + "\n".join(line for lines in new.values() for line in lines))
        for rel, (count, why) in KNOWN.items():
            have = len(found.get(rel, []))
            self.assertEqual(have, count, f"src/{rel} ({why}): {have} lines hold family knowledge, KNOWN says "
                             f"{count}: " + "\n".join(found.get(rel, [])))

    def test_the_check_sees_a_leak(self):
        probe = SRC / "pipeline" / "seam_probe.cpp"
        try:
            probe.write_text('// "qwen2.5-vl" in a comment is fine\n'
                             'bool q(const Manifest& m) { return m.arch == "qwen2.5-vl"; }\n'
                             'bool n(const Manifest& m) { return m.image.layout == ImageLayout::kNative; }\n'
                             'int64_t t(const Manifest& m) { return m.vision.temporal_patch_size; }\n')
            found = leaks([probe])
        finally:
            probe.unlink(missing_ok=True)
        self.assertEqual(len(found.get("pipeline/seam_probe.cpp", [])), 3, found)


if __name__ == "__main__":
    unittest.main()
