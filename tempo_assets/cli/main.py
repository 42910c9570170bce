"""``tempo``: the command-line interface.

Each sub-command lives in its own module exposing ``register(subparsers)``; this module only
dispatches, so importing it stays cheap.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# module name -> the sub-commands it registers (imported lazily, in this order)
COMMAND_MODULES = (
    "tempo_assets.cli.release_cmd",
    "tempo_assets.cli.graph_cmd",
    "tempo_assets.cli.audit_cmd",
    "tempo_assets.cli.audit_graph_cmd",
    "tempo_assets.cli.report_cmd",
    "tempo_assets.cli.test_claim_cmd",
    "tempo_assets.cli.method_cmd",
    "tempo_assets.cli.gate_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tempo",
        description="Tempo: leakage-proof temporal evaluation of protein function prediction.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error is one line on stderr and exit 2 (``cli/errors.py``)."""
    from tempo_assets.cli.errors import run_command

    parser = build_parser()
    args = parser.parse_args(argv)
    return run_command("tempo", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
