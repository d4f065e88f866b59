"""The README's contents line: every link points at a heading that exists (GitHub's anchor
rules), and every top-level (##) section is listed."""
import pathlib
import re
import sys
import unittest

from references.markdown import github_anchor  # GitHub's heading slugs, shared with docs.links

README = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else "README.md")


class ReadmeContents(unittest.TestCase):
    def setUp(self):
        self.text = README.read_text(encoding="utf-8")
        body = re.sub(r"```.*?```", "", self.text, flags=re.S)  # no headings inside code blocks
        seen = {}
        self.headings = [(m.group(1), m.group(2), github_anchor(m.group(2), seen))
                         for m in re.finditer(r"^(#{1,6}) (.+)$", body, re.M)]
        block = re.search(r"^\*\*Contents\.\*\*(.*?)\n\n", self.text, re.S | re.M)
        self.assertIsNotNone(block, "README.md has no **Contents.** paragraph")
        self.links = re.findall(r"\]\(#([^)]+)\)", block.group(1))

    def test_every_link_resolves(self):
        anchors = {a for _, _, a in self.headings}
        for link in self.links:
            self.assertIn(link, anchors, f"contents link #{link} matches no heading")

    def test_every_section_is_listed(self):
        for level, title, anchor in self.headings:
            if level == "##":
                self.assertIn(anchor, self.links, f"section '{title}' is missing from the contents")

    def test_contents_come_first(self):
        self.assertLess(self.text.index("**Contents.**"), self.text.index("\n## "))


if __name__ == "__main__":
    unittest.main()
