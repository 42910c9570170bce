"""``tempo test-claim list | release``: the per-window TEST claims (``core.storage.claims``).

A window has up to two claims: test_growth's (the one read of its TEST data) and test_score's
(its one scoring). ``list`` prints one line per claimed window, ``test_score[<window>] <state> <reason>`` with state
``claimed`` (a claim and no stored score: in flight, or its run died after reading TEST),
``read`` (TEST growth stored, not scored yet: ``tempo materialize --window W`` scores it),
``scored`` or ``burned``, and the claiming runs' status in the instance. ``release WINDOW
--reason TEXT`` burns a ``claimed`` window whose runs are no longer in progress (a ``read`` one is
refused, exit 2: nothing of TEST was lost and the next materialize scores it): the window is
marked "TEST read, not reported" for good (a burn record beside the claims, a line in the
append-only log, an observation of test_growth and test_score in the instance) and both assets
refuse it from then on.
"""
from __future__ import annotations

import argparse
import json
import sys

IN_PROGRESS = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")


def register(subparsers) -> None:
    parser = subparsers.add_parser("test-claim", help="list or release the per-window TEST claims",
                                   description=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="test_claim_command", metavar="ACTION")
    commands.required = True
    listing = commands.add_parser("list", help="every claimed window with its state (claimed, scored, burned)")
    listing.add_argument("--json", action="store_true", help="print a JSON list instead of lines")
    listing.set_defaults(func=run_list)
    release = commands.add_parser("release", help="burn a claimed window whose run died: TEST read, not reported")
    release.add_argument("window", metavar="WINDOW", help="window partition key")
    release.add_argument("--reason", required=True, metavar="TEXT", help="why the claim is released (logged)")
    release.set_defaults(func=run_release)


def claim_statuses(artefacts_root: str | None = None, windows=None) -> list:
    """``core.storage.claims.ClaimStatus`` of every claimed window in the artefact store.

    This is what ``tempo status`` shows as ``claimed`` / ``burned`` lines: a window is ``scored``
    when the store holds its ``test_score`` artefact.
    """
    from tempo_assets.core.storage.artefacts import ArtefactStore
    from tempo_assets.core.storage.claims import ClaimStore
    from tempo_assets.resources import default_artefacts_root

    root = artefacts_root or default_artefacts_root()
    store = ArtefactStore(root)
    return ClaimStore.beside(root).claims(lambda w: store.exists("test_score", w), windows=windows,
                                          growth_stored=lambda w: store.exists("test_growth", w))


def run_status(instance, run_id: str) -> str:
    """The claiming run's status in the instance (``unknown`` when it is not there)."""
    run = instance.get_run_by_id(run_id) if run_id and run_id != "unknown" else None
    return run.status.value if run is not None else "unknown"


def run_list(args: argparse.Namespace) -> int:
    import dagster as dg

    from tempo_assets.cli.graph_cmd import ensure_dagster_home
    from tempo_assets.runs import settle_dead_runs

    ensure_dagster_home()
    statuses = claim_statuses()
    with dg.DagsterInstance.get() as instance:
        settle_dead_runs(instance, echo=lambda line: print(line, file=sys.stderr))
        rows = [{**s.to_dict(), "line": s.line(),
                 "run_status": run_status(instance, s.claim.run_id) if s.claim else "unknown",
                 "run_statuses": {a: run_status(instance, c.run_id) for a, c in s.claims.items()}}
                for s in statuses]
    if args.json:
        print(json.dumps(rows, indent=1, sort_keys=True))
    else:
        for row in rows:
            runs = ", ".join(f"{a} run {s}" for a, s in row["run_statuses"].items())
            print(f"{row['line']} [{runs or 'run unknown'}]")
        if not rows:
            print("no TEST claims")
    return 0


def run_release(args: argparse.Namespace) -> int:
    import dagster as dg

    from tempo_assets.cli.graph_cmd import ensure_dagster_home
    from tempo_assets.runs import settle_dead_runs
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.storage.artefacts import ArtefactStore
    from tempo_assets.core.storage.claims import CLAIMED_ASSETS, ClaimStore
    from tempo_assets.resources import default_artefacts_root

    ensure_dagster_home()
    root = default_artefacts_root()
    store, claims = ArtefactStore(root), ClaimStore.beside(root)
    with dg.DagsterInstance.get() as instance:
        settle_dead_runs(instance, echo=lambda line: print(line, file=sys.stderr))
        for asset, claim in claims.claims_of(args.window).items():
            status = run_status(instance, claim.run_id)
            if status in IN_PROGRESS:
                raise TempoInputError(f"{asset}[{args.window}] is claimed by run {claim.run_id}, which is "
                                      f"{status}: wait for it to end before releasing its claim")
        burn = claims.release(args.window, args.reason, lambda w: store.exists("test_score", w),
                              growth_stored=lambda w: store.exists("test_growth", w))
        for asset in CLAIMED_ASSETS:
            instance.report_runless_asset_event(dg.AssetObservation(
                asset_key=asset, partition=args.window,
                metadata={"tempo/test_claim": "burned", "reason": burn.reason, "claim_run_id": burn.claim_run_id,
                          "released_by": burn.released_by}))
    print(f"TEST of window {args.window} burned: TEST read, not reported ({burn.reason}); "
          f"logged in {claims.log_path}")
    return 0
