"""Links in README.md, CONTRIBUTING.md and the site's pages (docs/) lead somewhere: every
relative link names a file that exists (or a page docs/gen_pages.py generates) and, with a
``#fragment``, a heading of that file. Checked from the Markdown alone, without building the
site (``mkdocs build --strict`` checks the rendered site in scripts/test.sh)."""

from __future__ import annotations

import importlib.util
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

import pytest

toc = pytest.importorskip("markdown.extensions.toc", reason="the docs extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FRONT = ("README.md", "CONTRIBUTING.md")  # read on GitHub

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
SNIPPET = re.compile(r'^([ \t]*)--8<-- "([^"]+)"[ \t]*$', re.M)
SECTION = r"--8<-- \[{}:{}\]"
EXPLICIT_ID = re.compile(r"\s*\{[^}]*#([\w-]+)[^}]*\}$")


def _gen_pages():
    spec = importlib.util.spec_from_file_location("gen_pages", DOCS / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _visible(text: str) -> str:
    """``text`` without fenced code blocks and code spans, where nothing is a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _heading_text(raw: str) -> str:
    raw = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # a link's text
    return re.sub(r"[`*]|(?<!\w)_|_(?!\w)", "", raw)


def github_slug(text: str) -> str:
    """A heading's anchor as GitHub renders Markdown files."""
    return re.sub(r"[^\w\- ]", "", _heading_text(text).strip().lower()).replace(" ", "-")


def site_slug(text: str) -> str:
    """A heading's anchor in the site (Python-Markdown's ``toc``, which mkdocs uses)."""
    return toc.slugify(_heading_text(text), "-")


def anchors(text: str, slug: Callable[[str], str]) -> set[str]:
    """Every heading anchor of a Markdown text, duplicates numbered as the renderer does."""
    found: set[str] = set()
    for raw in HEADING.findall(FENCE.sub("", text)):
        explicit = EXPLICIT_ID.search(raw)
        base = explicit.group(1) if explicit else slug(EXPLICIT_ID.sub("", raw))
        anchor, n = base, 0
        while anchor in found:
            n += 1
            anchor = f"{base}-{n}" if slug is github_slug else f"{base}_{n}"
        found.add(anchor)
    return found


def expand_snippets(text: str, problems: list[str], where: str) -> str:
    """``text`` with each ``--8<-- "FILE"`` / ``"FILE:SECTION"`` line replaced by what it
    includes (paths relative to the repository, as mkdocs.yml's snippets ``base_path``)."""

    def include(match: re.Match[str]) -> str:
        indent, target = match.groups()
        name, _, section = target.partition(":")
        path = ROOT / name
        if not path.is_file():
            problems.append(f"{where}: includes {name}, which does not exist")
            return ""
        lines = path.read_text().splitlines()
        if section:
            starts = [
                i
                for i, line in enumerate(lines)
                if re.search(SECTION.format("start", section), line)
            ]
            ends = [
                i for i, line in enumerate(lines) if re.search(SECTION.format("end", section), line)
            ]
            if not starts or not ends or ends[0] < starts[0]:
                problems.append(f"{where}: includes section {section!r} of {name}, not there")
                return ""
            lines = lines[starts[0] + 1 : ends[0]]
        return "\n".join(indent + line if line else line for line in lines)

    return SNIPPET.sub(include, text)


def broken_links(
    documents: dict[str, str], exists: Callable[[str], bool], generated: set[str]
) -> list[str]:
    """What is wrong with the relative links of ``documents`` (repository path -> text).

    Args:
        documents: The Markdown files to check, by their path in the repository.
        exists: Whether a repository path names a file or folder.
        generated: The site's generated files, as paths under ``docs/``.
    """
    problems: list[str] = []
    texts = {}
    for path, text in documents.items():
        texts[path] = expand_snippets(text, problems, path) if path.startswith("docs/") else text
    for path, text in texts.items():
        in_site = path.startswith("docs/")
        slug = site_slug if in_site else github_slug
        for target in LINK.findall(_visible(text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # a URL, not a relative link
            name, _, fragment = target.partition("#")
            resolved = (
                posixpath.normpath(posixpath.join(posixpath.dirname(path), name)) if name else path
            )
            if in_site and not resolved.startswith("docs/"):
                problems.append(f"{path}: {target} leaves the site (docs/)")
                continue
            page = resolved.removeprefix("docs/") if in_site else None
            if page is not None and (
                page in generated or any(g.startswith(page.rstrip("/") + "/") for g in generated)
            ):
                continue  # a generated page or folder: mkdocs build --strict checks its headings
            if not exists(resolved):
                problems.append(f"{path}: {target} names {resolved}, which does not exist")
                continue
            if fragment:
                if resolved.endswith(".md"):
                    target_text = texts.get(resolved) or (ROOT / resolved).read_text()
                    if fragment not in anchors(target_text, slug):
                        problems.append(f"{path}: {target}: {resolved} has no heading #{fragment}")
                else:
                    problems.append(f"{path}: {target}: a fragment of a file that is not Markdown")
    return problems


def test_every_relative_link_in_readme_contributing_and_docs_leads_somewhere():
    documents = {name: (ROOT / name).read_text() for name in FRONT}
    documents |= {
        path.relative_to(ROOT).as_posix(): path.read_text() for path in sorted(DOCS.rglob("*.md"))
    }
    assert len(documents) > len(FRONT), "docs/ has no pages"
    assert (
        broken_links(documents, lambda path: (ROOT / path).exists(), _gen_pages().generated_pages())
        == []
    )


def test_the_check_finds_a_missing_file_a_missing_heading_and_a_missing_include():
    documents = {
        "README.md": "# Title\n[ok](docs/a.md#two) [gone](docs/none.md) [bad](docs/a.md#three)\n",
        "docs/a.md": '# One\n## Two\n[up](#one) [out](../README.md)\n--8<-- "missing.md"\n',
        "docs/b.md": "[cli](reference/cli/x.md) [figure](assets/f.png) `[code](nowhere.md)`\n",
    }
    files = {"README.md", "docs/a.md", "docs/b.md"}
    problems = broken_links(documents, files.__contains__, {"reference/cli/x.md", "assets/f.png"})
    assert problems == [
        "docs/a.md: includes missing.md, which does not exist",
        "README.md: docs/none.md names docs/none.md, which does not exist",
        "README.md: docs/a.md#three: docs/a.md has no heading #three",
        "docs/a.md: ../README.md leaves the site (docs/)",
    ]


@pytest.mark.parametrize(
    ("heading", "github", "site"),
    [
        ("Data echoing (`echo/`)", "data-echoing-echo", "data-echoing-echo"),
        ("a -> b", "a---b", "a-b"),
        ("`late_join` and **bold**", "late_join-and-bold", "late_join-and-bold"),
    ],
)
def test_heading_anchors_are_the_renderers(heading, github, site):
    assert (github_slug(heading), site_slug(heading)) == (github, site)
