"""Adding a release to the archive from dated files (``add_release``) and deriving one at an
earlier cutoff from an existing release (``derive_release``): every file read whole and checked
first, then the release folder committed in one step.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from tempo_assets.core.base.dates import date_to_int, parse_date
from tempo_assets.core.inputs.precomputed_embeddings import load_precomputed_embeddings
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets.core.inputs.gaf import (
    gaf_generated_date, iter_gaf_lines, read_gaf, read_gaf_header, write_gaf_rows,
)
from tempo_assets.core.base.io import atomic_write, sha256_file
from tempo_assets.core.inputs.ontology import check_release_ontology
from tempo_assets.core.inputs.releases import (
    Archive, ArchiveError, MANIFEST_NAME, PROVENANCES, RELEASES_DIR, ReleaseFile, ReleaseManifest,
    _GENERATED, _RELEASE_ID, _verify_sha256,
)


@dataclass
class _Pending:
    name: str
    kind: str
    date: date
    provenance: str
    note: str | None


def _per_kind(value, kind: str, default=None):
    if isinstance(value, Mapping):
        return value.get(kind, default)
    return value if value is not None else default


def _check_release_id(release_id: str) -> None:
    if not _RELEASE_ID.match(str(release_id)):
        raise ArchiveError(
            f"invalid release id {release_id!r} (letters, digits, '.', '_', '-'; e.g. 2019-01-14)"
        )


def _place(source: Path, target: Path, link: bool) -> None:
    if target.exists():
        raise ArchiveError(f"two files of this release are both named {target.name!r}", source)
    if link:
        try:
            os.link(source, target)
            return
        except OSError:
            os.symlink(source.resolve(), target)
            return
    shutil.copyfile(source, target)


def _commit_release(
    archive_root: str | Path,
    release_id: str,
    populate: Callable[[Path], list[_Pending]],
    *,
    derived: bool,
    derived_from: str | None,
    species: Sequence[str],
    declared_date: date | None,
) -> ReleaseManifest:
    """Build a release in a hidden temporary folder, then rename it into place (atomic)."""
    _check_release_id(release_id)
    releases_dir = Path(archive_root) / RELEASES_DIR
    releases_dir.mkdir(parents=True, exist_ok=True)
    final = releases_dir / release_id
    if final.exists():
        raise ArchiveError(f"release {release_id!r} already exists", final)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{release_id}-", dir=releases_dir))
    try:
        pending = populate(tmp)
        files = tuple(
            ReleaseFile(
                path=item.name, kind=item.kind, date=item.date, sha256=sha256_file(tmp / item.name),
                provenance=item.provenance, note=item.note,
            )
            for item in pending
        )
        manifest = ReleaseManifest(
            id=release_id, as_of=max(f.date for f in files), derived=derived,
            derived_from=derived_from, species=tuple(species), files=files, folder=final,
            declared_date=declared_date,
        )
        with atomic_write(tmp / MANIFEST_NAME) as handle:
            json.dump(manifest.to_dict(), handle, indent=2)
            handle.write("\n")
        _relax_permissions(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            raise ArchiveError(f"release {release_id!r} already exists", final) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _relax_permissions(folder: Path) -> None:
    """Temporary files and folders are created owner-only; give what we wrote the umask's usual
    modes (hard-linked or symlinked inputs are left alone: they are someone else's files)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)
    for item in folder.iterdir():
        info = item.lstat()
        if item.is_symlink() or info.st_nlink > 1:
            continue
        os.chmod(item, 0o666 & ~umask)


def _gaf_species(frame: pd.DataFrame) -> set[str]:
    taxa = pd.unique(frame["taxon"])
    return {str(t).split("|")[0].removeprefix("taxon:") for t in taxa}


def _check_gaf_rows_within(path: Path, frame: pd.DataFrame, file_date: date) -> None:
    latest = int(frame["date"].max())
    if latest > date_to_int(file_date):
        count = int((frame["date"] > date_to_int(file_date)).sum())
        raise ArchiveError(
            f"{count} rows have a column-14 date after the file's own date "
            f"{file_date.isoformat()} (latest {latest})", path,
        )


@dataclass(frozen=True)
class ReleaseRequest:
    """What ``add_release`` is asked to archive: the files, their dates and their labels.

    ``provenance`` and ``note`` are one value for every file or a mapping by kind (``gaf``,
    ``obo``, ``fasta``, ``embeddings``); ``derived`` marks a release reconstructed from other
    data (not a snapshot that existed on that date).
    """

    release_id: str
    gafs: Sequence[str | Path]
    obo: str | Path
    fasta: str | Path | None = None
    embeddings: str | Path | None = None
    declared_date: date | str | None = None
    fasta_date: date | str | None = None
    embeddings_date: date | str | None = None
    provenance: str | Mapping[str, str] = "real"
    note: str | Mapping[str, str] | None = None
    derived: bool = False


@dataclass(frozen=True)
class DeriveRequest:
    """What ``derive_release`` is asked to build: release ``new_id`` cut from ``from_id``'s GAFs
    at ``cutoff``, with its own ``obo`` (and ``fasta``, dated ``fasta_date`` or the cutoff)."""

    from_id: str
    cutoff: date | str
    new_id: str
    obo: str | Path
    fasta: str | Path | None = None
    fasta_date: date | str | None = None
    provenance: str | Mapping[str, str] = "real"
    note: str | Mapping[str, str] | None = None


@dataclass(frozen=True)
class _Source:
    """One input file of a release being built, with its date and where the date comes from."""

    path: Path
    kind: str
    date: date
    origin: str


def add_release(
    archive_root: str | Path,
    request: ReleaseRequest,
    *,
    link: bool = False,
    today: date | None = None,
    report: Callable[[str], None] | None = None,
) -> ReleaseManifest:
    """Add a release to the archive (created if missing) and return its manifest.

    Each GAF is dated by its ``!Generated:`` header and each OBO by its ``data-version``; a FASTA
    or embeddings file takes ``fasta_date``/``embeddings_date``, else ``declared_date``, else the
    release id read as a date. The release's ``as_of`` is the latest of these dates. Where a
    file's own date replaces ``declared_date``, ``report`` is told in one line.

    Every file is read whole before anything is written: each GAF row, the whole OBO
    (``ontology.check_release_ontology``: cycles, missing roots, a cut file), each FASTA record,
    the embeddings; a truncated gzip stream is refused. ``today`` (default: the system's date)
    bounds every date: a release cannot come from the future. ``link`` hard-links (or
    symlinks) the files instead of copying them.

    Raises
    ------
    ArchiveError
        A duplicate id, a missing file, a file whose own date is after ``declared_date`` (naming
        the file and both dates), a date after ``today``, a file without a date where none is
        declared, or GAF rows dated after the GAF's own date. ``GafFormatError``,
        ``OboFormatError``, ``FastaFormatError``, ``EmbeddingFormatError``, ``DamagedFileError``
        for bad files, naming the file and line (or key).
    """
    release_id = request.release_id
    _check_release_id(release_id)
    today = today or date.today()
    declared = _declared_date(request.declared_date, today)
    if (Path(archive_root) / RELEASES_DIR / release_id).exists():
        raise ArchiveError(f"release {release_id!r} already exists", Path(archive_root) / RELEASES_DIR / release_id)
    if not request.gafs:
        raise ArchiveError("a release needs at least one GAF")
    id_date = _id_as_date(release_id)
    gaf_sources, species = _read_gaf_sources(request.gafs, declared, id_date)
    sources = [*gaf_sources, _read_obo_source(Path(request.obo), declared),
               *_read_extra_sources(request, declared, id_date)]
    _check_source_dates(sources, declared, today, report)

    def populate(tmp: Path) -> list[_Pending]:
        pending = []
        for source in sources:
            _place(source.path, tmp / source.path.name, link)
            pending.append(_labelled(source.path.name, source.kind, source.date, request.provenance, request.note))
        return pending

    return _commit_release(
        archive_root, release_id, populate, derived=request.derived, derived_from=None,
        species=sorted(species), declared_date=declared,
    )


def _declared_date(value: date | str | None, today: date) -> date | None:
    """The release's declared date, refused when it is after ``today``."""
    declared = parse_date(value) if value is not None else None
    if declared is not None and declared > today:
        raise ArchiveError(f"the declared date {declared.isoformat()} is after today ({today.isoformat()}); "
                           "a release cannot be dated in the future: declare the date its files were made")
    return declared


def _id_as_date(release_id: str) -> date | None:
    """The release id read as a date, or None when it is not one."""
    try:
        return parse_date(release_id)
    except ValueError:
        return None


def _read_gaf_sources(
    gafs: Sequence[str | Path], declared: date | None, id_date: date | None,
) -> tuple[list[_Source], set[str]]:
    """Read every GAF whole, date it, check its rows are not newer than it; the species seen."""
    sources: list[_Source] = []
    species: set[str] = set()
    for gaf in gafs:
        gaf = Path(gaf)
        _require_file(gaf)
        frame = read_gaf(gaf)
        file_date, origin = _dated((gaf_generated_date(gaf), "its '!Generated:' header"),
                                   (declared, "the declared date"), (id_date, "the release id"))
        if file_date is None:
            raise ArchiveError("GAF has no '!Generated:' header and no date was declared", gaf)
        _check_gaf_rows_within(gaf, frame, file_date)
        species |= _gaf_species(frame)
        sources.append(_Source(gaf, "gaf", file_date, origin))
    return sources, species


def _read_obo_source(obo: Path, declared: date | None) -> _Source:
    """Read the OBO whole (``check_release_ontology``) and date it."""
    _require_file(obo)
    obo_date, origin = _dated((check_release_ontology(obo).date, "its data-version/date header"),
                              (declared, "the declared date"))
    if obo_date is None:
        raise ArchiveError("OBO declares no data-version/date and no date was declared", obo)
    return _Source(obo, "obo", obo_date, origin)


def _read_extra_sources(request: ReleaseRequest, declared: date | None, id_date: date | None) -> list[_Source]:
    """Read the FASTA and embeddings (when given) whole and date each."""
    sources = []
    for path, kind, explicit in ((request.fasta, "fasta", request.fasta_date),
                                 (request.embeddings, "embeddings", request.embeddings_date)):
        if path is None:
            continue
        path = Path(path)
        _require_file(path)
        file_date, origin = _dated((parse_date(explicit) if explicit is not None else None, f"the {kind} date given"),
                                   (declared, "the declared date"), (id_date, "the release id"))
        if file_date is None:
            raise ArchiveError(f"{kind} file needs a date: pass a declared date", path)
        if kind == "fasta":
            read_fasta(path)
        else:
            load_precomputed_embeddings(path)
        sources.append(_Source(path, kind, file_date, origin))
    return sources


def _check_source_dates(
    sources: Sequence[_Source], declared: date | None, today: date, report: Callable[[str], None] | None,
) -> None:
    """No file from the future nor newer than the declared date; tell ``report`` where a file's
    own date replaces the declared one."""
    for source in sources:
        path, kind, file_date, origin = source.path, source.kind, source.date, source.origin
        if file_date > today:
            raise ArchiveError(
                f"{kind} file is dated {file_date.isoformat()} by {origin}, after today ({today.isoformat()}); "
                "a release cannot contain data from the future: check that date (or the system clock)", path,
            )
        if declared is not None and file_date > declared:
            raise ArchiveError(
                f"{kind} file is dated {file_date.isoformat()}, after the release's declared date "
                f"{declared.isoformat()}; a release cannot contain data newer than it claims",
                path,
            )
        if report is not None and declared is not None and file_date != declared:
            report(f"{path}: dated {file_date.isoformat()} by {origin}, which replaces the declared date "
                   f"{declared.isoformat()} for this file")


def _labelled(name: str, kind: str, file_date: date, provenance, note) -> _Pending:
    """A file placed as given, with its kind's provenance (checked) and note."""
    return _Pending(
        name=name, kind=kind, date=file_date,
        provenance=_check_provenance(_per_kind(provenance, kind, "real")),
        note=_per_kind(note, kind),
    )


def _dated(*candidates: tuple[date | None, str]) -> tuple[date | None, str]:
    """The first candidate date that is set, with where it comes from."""
    for value, origin in candidates:
        if value is not None:
            return value, origin
    return None, ""


def _check_provenance(value: str) -> str:
    if value not in PROVENANCES:
        raise ArchiveError(f"provenance must be one of {PROVENANCES}, not {value!r}")
    return value


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise ArchiveError("file not found: check the path", path)


def _derived_name(name: str, cutoff: date) -> str:
    for suffix in (".gaf.gz", ".gaf", ".gz"):
        if name.endswith(suffix):
            return f"{name[: -len(suffix)]}.cut-{cutoff.isoformat()}{suffix}"
    return f"{name}.cut-{cutoff.isoformat()}"


def derive_release(
    archive_root: str | Path, request: DeriveRequest, *, today: date | None = None,
) -> ReleaseManifest:
    """Reconstruct an older snapshot by cutting a release's GAFs at column 14 (``date <= cutoff``).

    The GAF headers are kept, with the generated date rewritten to ``cutoff`` and a ``!`` line
    saying the file is derived, from what, cut at what date. The manifest is ``derived: true``
    with ``derived_from``; the cut GAFs have provenance ``derived``. ``obo`` (and ``fasta``,
    dated ``fasta_date`` or the cutoff) are added as in ``add_release``, with ``provenance`` and
    ``note`` applying to them. Every file is read whole, the OBO as ``add_release`` reads it.

    Raises
    ------
    ArchiveError
        The cutoff is not earlier than a source GAF's date or is after ``today`` (default: the
        system's date), the OBO (or FASTA) is dated after the cutoff, the source file's sha256
        does not match, or ``new_id`` exists. ``OboFormatError``, ``FastaFormatError``,
        ``DamagedFileError`` for bad files.
    """
    archive = Archive(archive_root)
    source = archive.release(request.from_id)
    cutoff = parse_date(request.cutoff)
    today = today or date.today()
    if cutoff > today:
        raise ArchiveError(f"the cutoff {cutoff.isoformat()} is after today ({today.isoformat()}); "
                           "a derived release reconstructs the past: pass an earlier --cutoff")
    if (archive.releases_dir / request.new_id).exists():
        raise ArchiveError(f"release {request.new_id!r} already exists", archive.releases_dir / request.new_id)
    source_gafs = _check_gafs_to_cut(source, cutoff)
    extra = _read_files_at_cutoff(request, cutoff)

    def populate(tmp: Path) -> list[_Pending]:
        pending = [_cut_gaf(source, entry, cutoff, tmp) for entry in source_gafs]
        for path, kind, file_date in extra:
            _place(path, tmp / path.name, link=False)
            pending.append(_labelled(path.name, kind, file_date, request.provenance, request.note))
        return pending

    return _commit_release(
        archive_root, request.new_id, populate, derived=True, derived_from=request.from_id,
        species=source.species, declared_date=None,
    )


def _check_gafs_to_cut(source: ReleaseManifest, cutoff: date) -> list[ReleaseFile]:
    """The source release's GAFs, each dated after the cutoff and matching its sha256."""
    source_gafs = source.files_of("gaf")
    for entry in source_gafs:
        if cutoff >= entry.date:
            raise ArchiveError(
                f"cutoff {cutoff.isoformat()} is not earlier than the source GAF's date "
                f"{entry.date.isoformat()}; deriving needs an earlier date", source.file_path(entry),
            )
        _verify_sha256(source.file_path(entry), entry.sha256)
    return source_gafs


def _read_files_at_cutoff(request: DeriveRequest, cutoff: date) -> list[tuple[Path, str, date]]:
    """The derived release's OBO (and FASTA), read whole and dated no later than the cutoff."""
    obo = Path(request.obo)
    _require_file(obo)
    obo_date = check_release_ontology(obo).date
    if obo_date is None:
        raise ArchiveError("OBO declares no data-version/date", obo)
    if obo_date > cutoff:
        raise ArchiveError(
            f"OBO is dated {obo_date.isoformat()}, after the cutoff {cutoff.isoformat()}", obo
        )
    extra: list[tuple[Path, str, date]] = [(obo, "obo", obo_date)]
    if request.fasta is not None:
        fasta = Path(request.fasta)
        _require_file(fasta)
        file_date = parse_date(request.fasta_date) if request.fasta_date is not None else cutoff
        if file_date > cutoff:
            raise ArchiveError(
                f"FASTA is dated {file_date.isoformat()}, after the cutoff {cutoff.isoformat()}", fasta
            )
        read_fasta(fasta)
        extra.append((fasta, "fasta", file_date))
    return extra


def _derived_gaf_header(path: Path, entry: ReleaseFile, from_id: str, cutoff: date) -> list[str]:
    """The source GAF's header with its generated date rewritten to the cutoff and a ``!`` line
    saying the file is derived, from what, cut at what date."""
    header: list[str] = []
    generated = None
    for line in read_gaf_header(path):
        if _GENERATED.match(line) and generated is None:
            generated = line
            keyword = "date-generated" if "date-generated" in line.lower() else "Generated"
            header.append(f"!{keyword}: {cutoff.isoformat()}")
            continue
        header.append(line)
    if generated is None:
        header.append(f"!Generated: {cutoff.isoformat()}")
    stamp = generated.lstrip("!").strip() if generated else entry.date.isoformat()
    header.append(
        f"!Derived by Tempo: rows of {entry.path} (release {from_id}; {stamp}) whose "
        f"column-14 date is <= {cutoff.isoformat()}; a reconstructed snapshot, not a "
        "GOA release."
    )
    return header


def _cut_gaf(source: ReleaseManifest, entry: ReleaseFile, cutoff: date, tmp: Path) -> _Pending:
    """Write the rows of one source GAF dated on or before the cutoff into ``tmp``."""
    path = source.file_path(entry)
    limit = date_to_int(cutoff)
    counts = {"kept": 0, "total": 0}

    def rows():
        for _number, line, fields in iter_gaf_lines(path):
            if fields is None:
                continue
            counts["total"] += 1
            if int(fields[13]) <= limit:
                counts["kept"] += 1
                yield line

    name = _derived_name(entry.path, cutoff)
    write_gaf_rows(tmp / name, _derived_gaf_header(path, entry, source.id, cutoff), rows())
    if counts["kept"] == 0:
        raise ArchiveError(
            f"no rows of {entry.path} are dated on or before {cutoff.isoformat()}", path
        )
    return _Pending(
        name=name, kind="gaf", date=cutoff, provenance="derived",
        note=(f"derived from release {source.id} file {entry.path} (sha256 {entry.sha256[:12]}...): "
              f"{counts['kept']} of {counts['total']} rows with column-14 date <= "
              f"{cutoff.isoformat()}"),
    )
