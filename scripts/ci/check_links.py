#!/usr/bin/env python3
"""Checks the relative links of the documentation: README.md and docs/**/*.md.

    python3 -m scripts.ci.check_links [FILE.md ...]

Every Markdown link `[text](path#anchor)` (and image, and reference definition `[x]: path`)
whose target is not a URL must name an existing file or folder, relative to the page that
holds it; where it names a heading (`#anchor`, alone or after a `.md` path), that page must
have a heading whose GitHub slug is the anchor: the heading's text lower-cased, punctuation
dropped except `-` and `_`, each space a `-`; a repeated heading gets `-1`, `-2`, … (HTML
`id="…"` and `name="…"` anchors count too). Links inside code (fenced blocks and `code`
spans) are not links. Exit status 1 naming each broken link as FILE:LINE, else 0.

Standard library only; no network (URLs are not fetched).
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote

from scripts.common import REPO

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title"): the text may hold one level of brackets, the target one level of
# parentheses.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def default_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (inline Markdown reduced to its rendered text)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "").replace("*", "")
    out = []
    for ch in text.lower():
        if ch == " ":
            out.append("-")
        elif ch in "-_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append(ch)
    return "".join(out)


def lines_outside_code(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    out, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip().lstrip(fence[0]):
                fence = None
        else:
            out.append((n, line))
    return out


_anchor_cache: dict[Path, set[str]] = {}


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown page defines: heading slugs (with GitHub's -1, -2 for repeats)
    and HTML id / name attributes."""
    if path not in _anchor_cache:
        seen: dict[str, int] = {}
        found: set[str] = set()
        for _, line in lines_outside_code(path.read_text(encoding="utf-8")):
            found.update(a for a in HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchor_cache[path] = found
    return _anchor_cache[path]


def targets(line: str) -> list[str]:
    """The link targets of one line (outside code spans)."""
    masked = CODE_SPAN.sub(lambda m: "x" * len(m.group(0)), line)
    found = [m.group(1) for m in INLINE_LINK.finditer(masked)]
    m = REFERENCE_DEF.match(masked)
    if m:
        found.append(m.group(1))
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def check_target(page: Path, target: str) -> str | None:
    """Why a relative link target is broken, or None when it resolves (URLs are skipped)."""
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if path_part:
        dest = (REPO / path_part.lstrip("/")) if path_part.startswith("/") \
            else (page.parent / path_part)
        dest = dest.resolve()
        if not dest.exists():
            return "no such file"
    else:
        dest = page
    if anchor and dest.is_file() and dest.suffix.lower() == ".md":
        if unquote(anchor) not in anchors(dest):
            return f"no heading with anchor #{anchor} in {rel(dest)}"
    return None


def rel(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=Path,
                    help="Markdown files to check (default: README.md and docs/**/*.md)")
    args = ap.parse_args()
    files = [f.resolve() for f in args.files] or default_files()
    links = broken = 0
    for page in files:
        for n, line in lines_outside_code(page.read_text(encoding="utf-8")):
            for target in targets(line):
                links += 1
                why = check_target(page, target)
                if why:
                    broken += 1
                    print(f"{rel(page)}:{n}: broken link ({target}): {why}", file=sys.stderr)
    print(f"documentation links: {len(files)} files, {links} links, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
