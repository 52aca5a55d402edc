"""The documentation stays true: docs/algorithms.md's examples run, and the sections that code
comments cite by title exist.

The examples are `>>>` blocks, run by doctest as one session (later blocks use the names the
earlier ones made), so a change that alters an id, a merge or a count on that page fails here.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = ROOT / "docs" / "algorithms.md"
# Where comments may cite a section: `docs/algorithms.md, "Encoding"` (a comment may break the
# line between the file and the title).
CITATION = re.compile(r'docs/algorithms\.md,?\s*(?:#\s*)?"([^"\n]+)"')
CITING_FOLDERS = ["bpe", "webapp", "tests", "benchmarks", "scripts", "migrations"]


def test_algorithms_examples_run():
    result = doctest.testfile(
        str(ALGORITHMS), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.attempted > 0
    assert result.failed == 0


def _sections(path: Path) -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    }


def test_cited_sections_exist():
    sections = _sections(ALGORITHMS)
    cited: dict[str, list[str]] = {}
    for folder in CITING_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for title in CITATION.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(title, []).append(str(path.relative_to(ROOT)))
    assert cited, "no comment cites a section of docs/algorithms.md: is CITATION still right?"
    missing = {title: where for title, where in cited.items() if title not in sections}
    assert not missing, f"sections cited but not in docs/algorithms.md: {missing}"


def _anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return kept.replace(" ", "-")


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_links_between_pages_resolve():
    """Every relative link in the README and docs/ names a file that exists and, with `#`, a
    heading on that page: the README sends newcomers into docs/, so a moved section must not
    leave a dead link behind."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target):
                continue
            path_part, _, anchor = target.partition("#")
            linked = (page.parent / path_part).resolve() if path_part else page
            if not linked.exists():
                dead.append(f"{page.name}: {target}")
                continue
            if anchor and linked.suffix == ".md":
                headings = {
                    _anchor(line.lstrip("#"))
                    for line in linked.read_text(encoding="utf-8").splitlines()
                    if line.startswith("#")
                }
                if anchor not in headings:
                    dead.append(f"{page.name}: {target}")
    assert dead == []
