"""Every markdown file of the repository: its links stay inside the repository and resolve (files,
and #anchors to headings by GitHub's slug rules), and it stays short enough to read.

  test_docs.py [REPO_ROOT]

Checked: README.md, docs/**/*.md, tools/README.md, examples/**/*.md and every other *.md
(third_party/, build*/, .venv*/ and hidden folders are skipped). A link is [text](target) or
<http...> outside code blocks and inline code. Limits: README.md at most 300 lines, every other
page at most 600."""
import pathlib
import re
import sys
import unittest
import urllib.parse

from references.markdown import github_anchor

README_MAX_LINES = 300
DOC_MAX_LINES = 600
SKIP_DIRS = ("third_party", "build", ".venv", ".", "node_modules")


def strip_fences(text):
    """The text without fenced code blocks (no headings or links inside them)."""
    return re.sub(r"^ *(```|~~~).*?^ *\1 *$", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S | re.M)


def strip_code(text):
    """The text without fenced code blocks and inline code spans (links there are not links)."""
    return re.sub(r"(`+)[^`\n]*?\1", "", strip_fences(text))


def anchors_of(path):
    seen = {}
    body = strip_fences(path.read_text(encoding="utf-8"))
    heads = re.findall(r"^#{1,6} +(.+?) *#* *$", body, re.M)
    found = {github_anchor(h, seen) for h in heads}
    found |= set(re.findall(r'<a (?:name|id)="([^"]+)"', body))
    return found


def links_of(text):
    """(line number, target) of every inline link and autolink outside code."""
    body = strip_code(text)
    out = []
    for lineno, line in enumerate(body.split("\n"), 1):
        for m in re.finditer(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            out.append((lineno, m.group(1)))
        for m in re.finditer(r"<((?:https?|ftp|file|mailto):[^>\s]*)>", line):
            out.append((lineno, m.group(1)))
        for m in re.finditer(r"^\s*\[[^\]]+\]:\s*(\S+)", line):  # reference definitions
            out.append((lineno, m.group(1)))
    return out


def markdown_files(root):
    files = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).parts
        if any(part.startswith(SKIP_DIRS) for part in rel[:-1]):
            continue
        files.append(path)
    return files


def problems(root):
    """Every broken, outside or over-long thing, as 'file:line: why' strings."""
    root = root.resolve()
    bad = []
    anchor_cache = {}
    for path in markdown_files(root):
        rel = path.relative_to(root)
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        limit = README_MAX_LINES if rel == pathlib.Path("README.md") else DOC_MAX_LINES
        if lines > limit:
            bad.append(f"{rel}: {lines} lines, over the limit of {limit}")
        for lineno, target in links_of(text):
            where = f"{rel}:{lineno}: link '{target}'"
            if not target:
                bad.append(f"{where}: empty target")
                continue
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("//"):
                bad.append(f"{where}: leaves the repository")
                continue
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part)
            if file_part.startswith("/"):
                bad.append(f"{where}: absolute path")
                continue
            dest = (path.parent / file_part).resolve() if file_part else path
            try:
                dest.relative_to(root)
            except ValueError:
                bad.append(f"{where}: leaves the repository")
                continue
            if not dest.exists():
                bad.append(f"{where}: no such file")
                continue
            if anchor:
                if dest.is_dir() or dest.suffix != ".md":
                    bad.append(f"{where}: an anchor into a file that is not markdown")
                    continue
                if dest not in anchor_cache:
                    anchor_cache[dest] = anchors_of(dest)
                if urllib.parse.unquote(anchor) not in anchor_cache[dest]:
                    bad.append(f"{where}: no heading '#{anchor}' in {dest.relative_to(root)}")
    return bad


ROOT = pathlib.Path(__file__).resolve().parents[2]


class Docs(unittest.TestCase):
    def test_the_pages_exist(self):
        names = {p.relative_to(ROOT).as_posix() for p in markdown_files(ROOT)}
        for required in ("README.md", "docs/README.md", "docs/bundle-format.md", "docs/architecture.md",
                         "docs/perf/README.md"):
            self.assertIn(required, names)

    def test_links_resolve_inside_the_repository_and_pages_stay_short(self):
        bad = problems(ROOT)
        self.assertEqual(bad, [], "\n" + "\n".join(bad))

    def test_the_checker_catches_breakage(self):
        """The checks have teeth: a scratch tree with each kind of fault fails each one."""
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            t = pathlib.Path(tmp)
            (t / "docs").mkdir()
            (t / "docs" / "a.md").write_text("# A page\n\n## Part one\n")
            (t / "README.md").write_text(
                "# r\n[ok](docs/a.md#part-one) [gone](docs/b.md) [anchor](docs/a.md#part-two)\n"
                "[web](https://example.org) <http://example.org> [up](../x.md)\n"
                "`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n" + "x\n" * README_MAX_LINES)
            bad = "\n".join(problems(t))
            self.assertNotIn("part-one", bad)
            self.assertNotIn("nowhere", bad)
            for needle in ("docs/b.md': no such file", "'#part-two'", "https://example.org': leaves",
                           "http://example.org': leaves", "../x.md': leaves", "over the limit"):
                self.assertIn(needle, bad)

    def test_anchor_rules(self):
        seen = {}
        self.assertEqual(github_anchor("Using a real checkpoint", seen), "using-a-real-checkpoint")
        self.assertEqual(github_anchor("`era_infer` flags", seen), "era_infer-flags")
        self.assertEqual(github_anchor("LLaVA-OneVision (SigLIP + Qwen2)", seen), "llava-onevision-siglip--qwen2")
        self.assertEqual(github_anchor("ERA", seen), "era")
        self.assertEqual(github_anchor("ERA", seen), "era-1")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ROOT = pathlib.Path(sys.argv.pop(1)).resolve()
    unittest.main()
