"""``tempo``: the command-line interface.

Each sub-command lives in its own module exposing ``register(subparsers)``; this module only
dispatches, so importing it stays cheap.
"""
from __future__ import annotations

import argparse
import importlib
import os
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
    from tempo_assets.core.errors import TempoInputError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TempoInputError as exc:
        print(f"tempo: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        unreachable = unreachable_storage(exc)
        if unreachable is None:
            raise
        print(f"tempo: error: {unreachable}", file=sys.stderr)
        return 2


def unreachable_storage(exc: BaseException) -> str | None:
    """The message for a database that is down or refuses the credentials, else None.

    Dagster's Postgres storage retries, then raises its own exception from the driver's
    ``OperationalError``; the driver's message names the host and port (never the password).
    """
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    for error in seen:
        if type(error).__name__ != "OperationalError":
            continue
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        if "connection to server" in reason:
            home = os.environ.get("DAGSTER_HOME", "")
            return f"cannot reach Dagster's instance storage ({home}/dagster.yaml): {reason}"
    return None


if __name__ == "__main__":
    sys.exit(main())
