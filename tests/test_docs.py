"""The docs stay true: the README stays short and self-contained, every link and cited path
resolves, the exit-status table is exit_codes', and "where is X decided" names real code."""

import ast
import pathlib
import re

import pytest

from pipeline import exit_codes

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED_PATH = re.compile(
    r"`((?:data_prep|components|pipeline|benchmarks|tests|notebooks|docs)/[^`\s]*)`"
)
README_MAX_LINES = 300


def anchors(page: pathlib.Path) -> set[str]:
    """GitHub's anchors of the page's headings: lower case, punctuation dropped, spaces to '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= README_MAX_LINES


def test_readme_links_nothing_outside_the_repository():
    outside = [
        target
        for target in LINK.findall(README.read_text())
        if "://" in target or target.startswith(("/", ".."))
    ]
    assert outside == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or (anchor and anchor not in anchors(resolved)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_cited_path_exists(page):
    cited = {
        path.rstrip(".,:;")
        for path in CITED_PATH.findall(page.read_text())
        if not any(mark in path for mark in "<*") and "..." not in path
    }
    assert sorted(path for path in cited if not (ROOT / path).exists()) == []


def test_operations_lists_every_exit_status_once():
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    statuses = [int(s) for s in re.findall(r"^\| (\d+) \|", section, flags=re.MULTILINE)]
    assert statuses == sorted(exit_codes.IN_WORDS)
    for page in PAGES:  # and nowhere else as a table
        if page.name != "operations.md":
            assert not re.search(r"^\| (status|exit) \| meaning \|", page.read_text(), re.M)


def test_where_is_x_decided_names_existing_code():
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("## Where is X decided", 1)[1]
    missing = []
    for modules, names in re.findall(r"^\|[^|]+\| (`[^|]+`) \| ([^|]+) \|$", table, re.M):
        sources = [ROOT / module for module in re.findall(r"`([^`]+)`", modules)]
        defined = set()
        for source in sources:
            if source.is_dir():
                defined |= {path.name for path in source.iterdir()}
                continue
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    defined.add(node.name)
                    if isinstance(node, ast.ClassDef):
                        defined |= {
                            f"{node.name}.{item.name}"
                            for item in node.body
                            if isinstance(item, ast.FunctionDef)
                        }
        for name in re.findall(r"`([^`]+)`", names):
            if name not in defined:
                missing.append(f"{modules} {name}")
    assert missing == []
