"""The lab's real human files (``../shared/data/goa_archive``), parsed once per test run.

``test_real_growth``, ``test_warehouse``'s real sample and ``test_audits``' golden rule on real data read
the same GAFs, OBOs and FASTA. The first test of the run to ask for a file parses it (the project's own
parser: what is tested is unchanged) and leaves the result pickled in the run folder (conftest
``run_folder``, shared by the xdist workers), under a file lock; the others load the pickle: a GAF's
frame in hundredths of a second and an ontology in about 0.3 s, where parsing either takes about 1.5 s.
A missing file skips the test, or fails it under CI (toolkit ``shared``), before any cache is read.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, Callable

from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared

CACHE_FOLDER = "real_archive"


def parsed(folder: Path, relative: str, parse: Callable[[Path], Any]) -> Any:
    """``parse(GOA_ARCHIVE / relative)``, parsed once per run: the pickle under ``folder`` after the first."""
    from filelock import FileLock

    source = shared(GOA_ARCHIVE / relative)
    cache = folder / CACHE_FOLDER / f"{source.name}.{parse.__name__}.pickle"
    cache.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache) + ".lock"):
        if not cache.exists():
            value = parse(source)
            partial = cache.with_name(f"{cache.name}.{os.getpid()}")
            partial.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(partial, cache)
            return value
    return pickle.loads(cache.read_bytes())


def real_gaf(folder: Path, name: str):
    """``goa/<name>`` read by ``read_gaf``."""
    from tempo_assets.core.inputs.gaf import read_gaf

    return parsed(folder, f"goa/{name}", read_gaf)


def real_obo(folder: Path, name: str):
    """``go/<name>`` parsed by ``parse_obo``."""
    from tempo_assets.core.inputs.ontology import parse_obo

    return parsed(folder, f"go/{name}", parse_obo)


def real_fasta(folder: Path):
    """The 2014-01-31 Swiss-Prot human and mouse FASTA read by ``read_fasta``."""
    from tempo_assets.core.inputs.fasta import read_fasta

    return parsed(folder, "uniprot/uniprot_sprot_2014-01-31_human_mouse.fasta.gz", read_fasta)
