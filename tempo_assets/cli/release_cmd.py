"""``tempo release add|derive|list``: manage a release archive."""
from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    release = subparsers.add_parser(
        "release", help="add, derive or list the releases of an archive",
        description="Manage a release archive (ARCHIVE/releases/<id>/release.json).",
    )
    actions = release.add_subparsers(dest="release_command", metavar="ACTION")
    actions.required = True

    add = actions.add_parser("add", help="add a release from GAF/OBO/FASTA files")
    add.add_argument("archive", metavar="ARCHIVE")
    add.add_argument("--id", required=True, dest="release_id", help="release id, e.g. 2019-01-14")
    add.add_argument("--gaf", required=True, action="append", metavar="FILE",
                     help="GAF file (repeat for several species)")
    add.add_argument("--obo", required=True, metavar="FILE")
    add.add_argument("--fasta", metavar="FILE")
    add.add_argument("--embeddings", metavar="FILE")
    add.add_argument("--date", metavar="DATE",
                     help="declared date: no file may be newer; dates FASTA/embeddings by default")
    add.add_argument("--fasta-date", metavar="DATE", help="the FASTA's own date")
    add.add_argument("--embeddings-date", metavar="DATE", help="the embeddings' own date")
    add.add_argument("--derived", action="store_true",
                     help="mark the release as reconstructed rather than a real snapshot")
    add.add_argument("--provenance", choices=("real", "derived"), default="real",
                     help="provenance of the files (default: real)")
    add.add_argument("--note", help="a note stored with every file")
    add.add_argument("--link", action="store_true", help="hard-link (or symlink) instead of copying")
    add.set_defaults(func=run_add)

    derive = actions.add_parser("derive", help="cut a release's GAFs at a column-14 date")
    derive.add_argument("archive", metavar="ARCHIVE")
    derive.add_argument("--from", required=True, dest="from_id", metavar="ID")
    derive.add_argument("--cutoff", required=True, metavar="DATE")
    derive.add_argument("--id", required=True, dest="release_id", metavar="NEWID")
    derive.add_argument("--obo", required=True, metavar="FILE")
    derive.add_argument("--fasta", metavar="FILE")
    derive.add_argument("--fasta-date", metavar="DATE", help="the FASTA's own date (default: cutoff)")
    derive.set_defaults(func=run_derive)

    listing = actions.add_parser("list", help="one line per release: id, as_of, derived, files")
    listing.add_argument("archive", metavar="ARCHIVE")
    listing.set_defaults(func=run_list)


def _date_arg(value: str | None, flag: str):
    from tempo_assets.core.base.dates import parse_date
    from tempo_assets.core.base.errors import TempoInputError

    if value is None:
        return None
    try:
        return parse_date(value)
    except ValueError as exc:
        raise TempoInputError(f"{flag}: {exc}") from None


def _describe(manifest) -> str:
    files = ",".join(f"{entry.kind}:{entry.path}" for entry in manifest.files)
    derived = f"derived(from={manifest.derived_from})" if manifest.derived_from else (
        "derived" if manifest.derived else "real")
    return f"{manifest.id}\tas_of={manifest.as_of.isoformat()}\t{derived}\t{files}"


def run_add(args: argparse.Namespace) -> int:
    from tempo_assets.core.inputs.new_releases import ReleaseRequest, add_release

    request = ReleaseRequest(
        args.release_id, args.gaf, args.obo, fasta=args.fasta, embeddings=args.embeddings,
        declared_date=_date_arg(args.date, "--date"),
        fasta_date=_date_arg(args.fasta_date, "--fasta-date"),
        embeddings_date=_date_arg(args.embeddings_date, "--embeddings-date"),
        provenance=args.provenance, note=args.note, derived=args.derived,
    )
    manifest = add_release(args.archive, request, link=args.link,
                           report=lambda line: print(f"note: {line}"))
    print(f"added {_describe(manifest)}")
    return 0


def run_derive(args: argparse.Namespace) -> int:
    from tempo_assets.core.inputs.new_releases import DeriveRequest, derive_release

    manifest = derive_release(args.archive, DeriveRequest(
        args.from_id, _date_arg(args.cutoff, "--cutoff"), args.release_id,
        args.obo, fasta=args.fasta, fasta_date=_date_arg(args.fasta_date, "--fasta-date"),
    ))
    print(f"derived {_describe(manifest)}")
    for entry in manifest.files_of("gaf"):
        print(f"  {entry.path}: {entry.note}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from tempo_assets.core.inputs.releases import Archive

    releases = Archive(args.archive).releases()
    if not releases:
        print(f"no releases in {args.archive}", file=sys.stderr)
    for manifest in releases:
        print(_describe(manifest))
    return 0
