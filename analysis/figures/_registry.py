"""Figure registry: ``@figure("name", inputs=..., caption=...)`` on the function that draws it,
and discovery of the modules of ``analysis.figures``.

Adding a figure is one new module ``analysis/figures/<name>.py`` holding one registered
function; the command line (``python -m analysis figure``), the reference table's
``our_figure`` names, the workflow's ``figure`` rule and the report's captions all read the
registry.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from analysis._io import require_columns
from analysis.figures._common import finish
from analysis.figures._sheet import Sheet
from analysis.records import read_curves, read_runs
from analysis.reference import for_figure

__all__ = ["FIGURE_PACKAGE", "TABLES", "FigureSpec", "Table", "discover", "figure", "get", "names"]

FIGURE_PACKAGE = "analysis.figures"


@dataclass(frozen=True)
class Table:
    """A kind of table a figure can be drawn from.

    Attributes:
        read: Reads the table from a CSV path.
        help: What the file is, for ``python -m analysis figure --help``.
    """

    read: Callable[[str], pd.DataFrame]
    help: str


def read_sharing(path: str) -> pd.DataFrame:
    """The shared_loading benchmark's rows run under the machine's own /dev/shm (``shm_mb``
    0): rows from a capped one (``--shm-mb 64``) are the benchmark's own check that sharing
    works in a container, not the figures' and claims' comparison.

    Args:
        path (str): The CSV.

    Returns:
        pd.DataFrame: Its rows with ``shm_mb`` 0 (all of them in a table without the column).
    """
    table = pd.read_csv(path)
    if "shm_mb" not in table:
        return table
    return table[table["shm_mb"] == 0].reset_index(drop=True)


TABLES = {
    "runs": Table(read_runs, "runs CSV (from aggregate)"),
    "curves": Table(read_curves, "eval-curves CSV (from aggregate)"),
    "sharing": Table(read_sharing, "shared_loading benchmark CSV"),
    "echo_speedup": Table(pd.read_csv, "echo_speedup benchmark CSV"),
    "sharing_ray": Table(pd.read_csv, "sharing_ray benchmark CSV (benchmarks.sharing_ray)"),
}
"""Table name -> how to read it. A figure's ``inputs`` name some of these; on the command
line each is an option (``--runs``, ``--echo-speedup``)."""


@dataclass(frozen=True)
class FigureSpec:
    """One registered figure.

    Attributes:
        name: The figure's name: its module, its files (``<name>.png``), the CLI argument
            and the reference table's ``our_figure``.
        draw: Draws it: ``draw(*tables, reference=None, [study=...,] **options) -> Figure``,
            the tables in the order of ``inputs``.
        inputs: The tables it is drawn from (keys of ``TABLES``).
        caption: One paragraph, for the report.
        study: The study of run records it draws by default; None for a figure drawn from
            a benchmark's table (it takes no ``study``).
    """

    name: str
    draw: Callable[..., Figure]
    inputs: tuple[str, ...]
    caption: str
    study: str | None = None


_FIGURES: dict[str, FigureSpec] = {}


def _public_signature(
    function: Callable[..., Figure], inputs: Sequence[str], study: str | None
) -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(t, positional, annotation=pd.DataFrame) for t in inputs]
    parameters.append(
        inspect.Parameter("reference", positional, default=None, annotation=pd.DataFrame | None)
    )
    if study is not None:
        parameters.append(inspect.Parameter("study", keyword, default=study, annotation=str))
    options = list(inspect.signature(function).parameters.values())[1:]
    wrong = [option.name for option in options if option.kind is not keyword]
    if wrong or {option.name for option in options} & {"study", "reference", *inputs}:
        raise ValueError(
            f"{function.__qualname__} must take the sheet and then keyword-only options "
            f"other than study, reference and its tables; got {[o.name for o in options]}"
        )
    return inspect.Signature([*parameters, *options], return_annotation=Figure)


def figure(
    name: str,
    *,
    inputs: Mapping[str, Sequence[str]],
    caption: str,
    study: str | None = None,
) -> Callable[[Callable[..., Figure]], Callable[..., Figure]]:
    """Register the decorated function as the figure ``name``.

    The function takes a `Sheet` (its tables checked, the study, the reference rows of this
    figure, a list of notes) and its own keyword-only options, and returns the figure; the
    registered ``draw`` takes the tables themselves and adds the legend, the notes and the
    reference rows nothing placed (`analysis.figures._common.finish`). The function's
    docstring is the registered ``draw``'s: it documents the tables, ``reference``,
    ``study`` and the options.

    Args:
        name: The figure's name; also the name of the module that registers it.
        inputs: Table name (a key of ``TABLES``) -> the columns the figure needs in it.
        caption: One paragraph for the report.
        study: The study of run records drawn by default (overridable with ``study=``).
            Default None: the figure is drawn from benchmark tables only.

    Returns:
        A decorator returning the registered ``draw`` function.

    Raises:
        ValueError: ``name`` is taken by another function, differs from the module's name,
            an input is not a key of ``TABLES``, or the function's options clash with the
            arguments ``draw`` adds.
    """
    unknown = [table for table in inputs if table not in TABLES]
    if unknown:
        raise ValueError(f"figure {name!r}: inputs {unknown} are not among {list(TABLES)}")

    def register(function: Callable[..., Figure]) -> Callable[..., Figure]:
        module = function.__module__.rpartition(".")[2]
        if module != name:
            raise ValueError(
                f"figure {name!r} is registered in module {function.__module__!r}: a figure "
                f"lives in a module of the same name ({name}.py)"
            )
        known = _FIGURES.get(name)
        if known is not None and known.draw.__module__ != function.__module__:
            raise ValueError(f"figure name {name!r} is already registered by {known.draw!r}")
        signature = _public_signature(function, list(inputs), study)

        def draw(*args: object, **kwargs: object) -> Figure:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            tables = {table: arguments.pop(table) for table in inputs}
            for table, columns in inputs.items():
                require_columns(tables[table], columns, table)
            paper = _drawn_beside(arguments.pop("reference"), name)
            number = paper["kind"] == "number"
            sheet = Sheet(
                tables=tables,
                study=arguments.pop("study", None),
                paper=paper[number].reset_index(drop=True),
                claims=paper[~number].reset_index(drop=True),
            )
            drawing = function(sheet, **arguments)
            return finish(drawing, sheet.notes, sheet.unplaced(), sheet.claims)

        draw.__signature__ = signature
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(draw, attribute, getattr(function, attribute))
        _FIGURES[name] = FigureSpec(name, draw, tuple(inputs), caption, study)
        return draw

    return register


def _drawn_beside(reference: pd.DataFrame | None, name: str) -> pd.DataFrame:
    """The reference rows drawn beside the figure ``name`` (`analysis.reference.for_figure`),
    after checking that every figure the table's ``our_figure`` names is registered.

    Raises:
        ValueError: The table names a figure that is not registered (the message lists the
            registered names).
    """
    if reference is not None:
        known = names()
        unknown = sorted(set(reference["our_figure"]) - {""} - set(known))
        if unknown:
            raise ValueError(
                f"reference: our_figure {unknown[0]!r} is not a registered figure; "
                f"valid: {', '.join(known)}"
            )
    return for_figure(reference, name)


def discover(package: str = FIGURE_PACKAGE) -> None:
    """Import every public module of ``package`` so that their ``@figure`` decorators run."""
    found = importlib.import_module(package)
    for module in pkgutil.iter_modules(found.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")


def names() -> list[str]:
    """Sorted names of all registered figures (after discovering `FIGURE_PACKAGE`)."""
    discover()
    return sorted(_FIGURES)


def get(name: str) -> FigureSpec:
    """The figure registered as ``name``.

    Raises:
        ValueError: No such figure; the message lists the registered names.
    """
    known = names()
    if name not in _FIGURES:
        raise ValueError(f"figure={name!r} is not registered; valid: {', '.join(known)}")
    return _FIGURES[name]
