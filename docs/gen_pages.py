"""The site's generated pages, written at build time by mkdocs-gen-files (``mkdocs.yml`` runs
this script), so that nothing in them can drift from the code:

* ``reference/cli/``: each command's ``--help``, from its own argparse parser. A command is
  any module of the command packages that runs ``main`` under ``if __name__ == "__main__":``
  (or a package's ``__main__.py``); subcommands get a section each.
* ``reference/api/``: one page per public module (no part of its name starts with ``_``),
  rendered from its docstrings by mkdocstrings.
* ``assets/``: the committed figures, copied from where the analysis and the benchmarks write
  them, for the results and benchmarks pages.

`generated_pages` names every file the build adds without importing the project, so that
``tests/test_docs.py`` can check links into generated pages without building the site.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import runpy
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
API_PACKAGES = ("echo", "sharing", "run_contract", "experiments", "analysis")
COMMAND_PACKAGES = ("echo", "experiments", "analysis", "sharing", "benchmarks")
FIGURES = {"assets/figures": "paper_figures", "assets/benchmarks": "benchmarks/reference"}
"""Site folder -> the project folder whose PNGs it shows."""
HELP_COLUMNS = "100"
MAIN_GUARD = 'if __name__ == "__main__":'


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] in ("__init__", "__main__") else parts)


def commands() -> list[str]:
    """The modules run as ``python -m MODULE``, in the order of `COMMAND_PACKAGES`."""
    found = []
    for package in COMMAND_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if path.name == "__main__.py" or (MAIN_GUARD in text and "def main(" in text):
                found.append(_module_name(path))
    return found


def public_modules() -> list[str]:
    """The modules with an API page: packages and modules of `API_PACKAGES` whose names have
    no private part."""
    found = []
    for package in API_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not any(part.startswith("_") for part in parts):
                found.append(".".join(parts))
    return found


def cli_page(command: str) -> str:
    """The page of ``python -m command``, relative to ``docs/``."""
    return f"reference/cli/{command}.md"


def api_page(module: str) -> str:
    """The API page of ``module``, relative to ``docs/``."""
    parts = module.split(".")
    is_package = (ROOT.joinpath(*parts) / "__init__.py").is_file()
    return "reference/api/" + "/".join([*parts, "index"] if is_package else parts) + ".md"


def figure_files() -> dict[str, Path]:
    """Each copied figure's path in the site -> the committed file."""
    return {
        f"{site}/{png.relative_to(ROOT / source).as_posix()}": png
        for site, source in FIGURES.items()
        for png in sorted((ROOT / source).rglob("*.png"))
    }


def generated_pages() -> set[str]:
    """Every file this script adds to the site, relative to ``docs/``."""
    pages = {"reference/cli/index.md", "reference/cli/SUMMARY.md", "reference/api/SUMMARY.md"}
    pages |= {cli_page(command) for command in commands()}
    pages |= {api_page(module) for module in public_modules()}
    return pages | set(figure_files())


class _Parsed(BaseException):
    """Raised in place of parsing: carries the parser a command built."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def parser_of(command: str) -> argparse.ArgumentParser:
    """The parser ``python -m command`` builds, caught when it starts parsing (nothing else of
    the command runs)."""

    def caught(parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(parser)

    with (
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", caught),
        # runpy sets argv[0] to the module's file, as `python -m` does: the same default prog
        mock.patch.object(sys, "argv", [command, "--help"]),
        mock.patch.dict(os.environ, {"COLUMNS": HELP_COLUMNS}),
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: a module already imported
        try:
            runpy.run_module(command, run_name="__main__", alter_sys=True)
        except _Parsed as parsed:
            return parsed.parser
    raise RuntimeError(f"python -m {command} returned without parsing its arguments")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for sub in action.choices.values():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield sub
                    yield from _subcommands(sub)


def _help(parser: argparse.ArgumentParser) -> str:
    with mock.patch.dict(os.environ, {"COLUMNS": HELP_COLUMNS}):
        return parser.format_help().rstrip()


def cli_markdown(command: str, parser: argparse.ArgumentParser) -> str:
    """The page of one command: its help, then each subcommand's."""
    sections = [f"# python -m {command}\n", f"```text\n{_help(parser)}\n```\n"]
    for sub in _subcommands(parser):
        sections += [f"## {sub.prog}\n", f"```text\n{_help(sub)}\n```\n"]
    return "\n".join(sections)


def _summary(parser: argparse.ArgumentParser) -> str:
    text = " ".join((parser.description or "").split()).replace("|", "\\|")
    return text.split(". ")[0].rstrip(".")


def write_cli_pages(files: Any) -> None:
    """The command-line reference: one page per command, an index and its nav."""
    index = [
        "# Command line\n",
        "Generated from each command's own parser at every build of this site.\n",
        "| command | what it does |",
        "|---|---|",
    ]
    nav = ["* [Overview](index.md)"]
    for command in commands():
        parser = parser_of(command)
        page = cli_page(command)
        with files.open(page, "w") as out:
            out.write(cli_markdown(command, parser))
        name = Path(page).name
        index.append(f"| [`python -m {command}`]({name}) | {_summary(parser)} |")
        nav.append(f"* [{command}]({name})")
    with files.open("reference/cli/index.md", "w") as out:
        out.write("\n".join(index) + "\n")
    with files.open("reference/cli/SUMMARY.md", "w") as out:
        out.write("\n".join(nav) + "\n")


def write_api_pages(files: Any, nav: Any) -> None:
    """One mkdocstrings page per public module, and the nav of them."""
    for module in public_modules():
        page = api_page(module)
        with files.open(page, "w") as out:
            out.write(f"# {module}\n\n::: {module}\n")
        nav[tuple(module.split("."))] = page.removeprefix("reference/api/")
    with files.open("reference/api/SUMMARY.md", "w") as out:
        out.writelines(nav.build_literate_nav())


def write_figures(files: Any) -> None:
    """The committed figures, copied into the site."""
    for site, source in figure_files().items():
        with files.open(site, "wb") as out:
            out.write(source.read_bytes())


def main() -> None:
    """Write every generated page into the build (run by mkdocs-gen-files)."""
    import mkdocs_gen_files

    sys.path.insert(0, str(ROOT))
    write_cli_pages(mkdocs_gen_files)
    write_api_pages(mkdocs_gen_files, mkdocs_gen_files.Nav())
    write_figures(mkdocs_gen_files)


if __name__ == "<run_path>":  # how mkdocs-gen-files runs it (runpy.run_path); not on import
    main()
