"""Each default is stated once: the workflow config's schema holds the study's and the
benchmarks' it runs, `Producer`'s signature the shared loader's; the code that reads them
repeats none, and a count of consumers has one name from the config to the producer."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments.study import SCHEMA
from sharing import Producer

ROOT = Path(__file__).parents[1]


def schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA.read_text())


def schema_defaults(node: Any) -> Iterator[tuple[str, Any]]:
    """``(key, default)`` for every property of ``node`` (a schema) that states a default."""
    if isinstance(node, dict):
        for key, sub in node.get("properties", {}).items():
            if isinstance(sub, dict) and "default" in sub:
                yield key, sub["default"]
        for value in node.values():
            yield from schema_defaults(value)
    elif isinstance(node, list):
        for value in node:
            yield from schema_defaults(value)


NOT_LITERAL = object()  # equal to no default


def literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return NOT_LITERAL


def named_literals(path: Path) -> Iterator[tuple[str, Any, int]]:
    """``(name, value, line)`` for each literal the code of ``path`` gives a name: a keyword
    argument, a dict entry, an assignment, ``.get("name", value)`` and ``add_argument("--name",
    default=value)``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg is not None:
                    yield keyword.arg, literal(keyword.value), node.lineno
            function, args = node.func, node.args
            if isinstance(function, ast.Attribute) and args and isinstance(args[0], ast.Constant):
                name = str(args[0].value)
                if function.attr == "get" and len(args) == 2:
                    yield name, literal(args[1]), node.lineno
                if function.attr == "add_argument":
                    for keyword in node.keywords:
                        if keyword.arg == "default":
                            yield (
                                name.lstrip("-").replace("-", "_"),
                                literal(keyword.value),
                                node.lineno,
                            )
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, literal(value), node.lineno
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id.lower(), literal(node.value), node.lineno


@pytest.mark.parametrize(
    "module",
    ["experiments/study.py", "benchmarks/sharing.py"],
)
def test_no_code_repeats_a_schema_default_for_its_key(module):
    defaults = list(schema_defaults(schema()))
    repeated = [
        f"{module}:{line}: {name} = {value!r}"
        for name, value, line in named_literals(ROOT / module)
        for key, default in defaults
        if name == key and value == default and isinstance(value, bool) == isinstance(default, bool)
    ]
    assert not repeated, "the schema holds these defaults:\n" + "\n".join(repeated)


@pytest.mark.parametrize(
    "path",
    [
        "experiments/study.py",
        *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("workflow/**/*.smk")),
    ],
)
def test_the_config_is_read_without_get_defaults(path):
    """The config is checked against the schema (its defaults filled in) before it is read."""
    text = (ROOT / path).read_text()
    assert not re.findall(r"config(?:\[[^\]]+\])*\.get\([^)]*,", text), path
    if path.endswith(".py"):
        gets = [
            node.lineno
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
        ]
        assert not gets, f"{path}: .get(key, default) at lines {gets}"


def test_every_option_of_the_sharing_benchmark_has_a_default_and_a_description():
    """Its command line is derived from them (`benchmarks.common.add_schema_options`)."""
    for name, option in schema()["properties"]["sharing"]["properties"].items():
        assert {"default", "description"} <= set(option), name


def test_the_sharing_benchmarks_command_line_defaults_are_the_schemas(monkeypatch):
    import benchmarks.sharing as bench

    taken = {}
    monkeypatch.setattr(bench, "run", lambda out, options, path: taken.update(options))
    bench.main(["--out", "unused.csv"])
    section = schema()["properties"]["sharing"]["properties"]
    assert taken == {name: option["default"] for name, option in section.items()}


def producer_keywords() -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(Producer).parameters.values()
    return {p.name: p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_sharing_serve_takes_producers_defaults_and_states_none_of_its_own():
    from sharing.__main__ import parse_args

    args = vars(parse_args(["serve", "--loader", "module:function"]))
    assert {name: args[name] for name in producer_keywords()} == {
        name: parameter.default for name, parameter in producer_keywords().items()
    }
    keywords = producer_keywords()
    stated = [
        f"line {line}: {name} = {value!r}"
        for name, value, line in named_literals(ROOT / "sharing" / "__main__.py")
        if name in keywords and value == keywords[name].default
    ]
    assert not stated


def test_producers_docstring_states_its_signatures_defaults():
    from sharing.__main__ import _described

    for name, text in _described(Producer).items():
        found = re.search(r"Default (-?\d+(?:\.\d+)?|None)(?=[.:;,)]|$)", text)
        if name in producer_keywords() and found:
            stated = None if found[1] == "None" else float(found[1])
            assert stated == producer_keywords()[name].default, name


def test_a_count_of_consumers_has_one_name_from_the_config_to_the_producer():
    assert "consumers" in schema()["properties"]["sharing"]["properties"]
    assert "consumers" in producer_keywords() and "wait_for" not in producer_keywords()
    for module in ("benchmarks/sharing.py", "benchmarks/gpu_sharing.py"):
        tree = ast.parse((ROOT / module).read_text())
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and (ast.unparse(node.func) in ("Producer", "Producer.from_dataset"))
        ]
        assert calls, module
        for call in calls:
            given = {keyword.arg: ast.unparse(keyword.value) for keyword in call.keywords}
            assert given["consumers"] == "consumers", f"{module}:{call.lineno}"
