"""The command-line derivation shared by `run_contract.identity.RunSpec` and `RunOptions`:
each dataclass field declared with `run_contract.fields.option` is one option."""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, fields
from typing import Any

from run_contract.fields import flag, number_text, parse_hparam, value_text

__all__ = ["CommandLine"]


class CommandLine:
    """CLI derivation shared by `RunSpec` and `RunOptions` (each field is one option)."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one option per field to ``parser`` (help, type, choices and default from it)."""
        for f in fields(cls):
            meta, default = f.metadata, f.default
            described = (
                meta["help"]
                if default is None
                else f"{meta['help']} (default {value_text(default)})"
            )
            if isinstance(default, bool):
                parser.add_argument(
                    flag(f"no_{f.name}"), dest=f.name, action="store_false", help=meta["help"]
                )
            elif f.name == "hparams":
                parser.add_argument(
                    "--hparam", dest="hparams", type=parse_hparam, action="append", default=[],
                    metavar="KEY=VALUE", help=meta["help"],
                )  # fmt: skip
            elif default is MISSING:
                parser.add_argument(
                    flag(f.name), required=True, choices=meta["choices"], help=meta["help"]
                )
            else:
                parser.add_argument(
                    flag(f.name), type=meta["parse"], choices=meta["choices"],
                    default=default, help=described,
                )  # fmt: skip

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Any:
        """The instance for parsed arguments (``ValueError`` for a bad combination)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def args(self) -> list[str]:
        """The ``python -m experiments.run`` options giving this instance (defaults left out)."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if isinstance(f.default, bool):
                out.append(flag(f"no_{f.name}"))
            elif f.name == "hparams":
                out += [a for k, v in value for a in ("--hparam", f"{k}={json.dumps(v)}")]
            else:
                text = number_text(value) if isinstance(value, float) else str(value)
                out += [flag(f.name), text]
        return out
