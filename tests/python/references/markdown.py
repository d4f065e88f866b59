"""Markdown facts the docs tests share."""
import re


def github_anchor(heading, seen):
    """GitHub's slug: lower case, punctuation but '-' and '_' dropped, spaces to '-', and
    '-1', '-2'... for repeats."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"
