"""Every temporary file or folder Tempo makes in the system's temporary folder names its owner
(``core/base/liveness.owned_temporary_folder``), so what a process killed by SIGKILL leaves behind is
swept by the next one: no call of ``tempfile`` makes one there without an owner. A call with ``dir=``
makes it inside a folder Tempo keeps (the artefact store, a release's staging), where the rename that
follows or the store's own rules deal with it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tempo_assets

PACKAGE = Path(tempo_assets.__file__).parent
# the one place allowed to call tempfile for a folder in the system's temporary folder
OWNER = PACKAGE / "core" / "base" / "liveness.py"
MAKERS = {"TemporaryDirectory", "mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"}


def unowned_temporaries(source: str) -> list[int]:
    """The lines of ``source`` that call a ``tempfile`` maker without ``dir=``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name in MAKERS and not any(k.arg == "dir" for k in node.keywords):
            lines.append(node.lineno)
    return lines


def test_no_module_makes_a_temporary_folder_without_its_owner():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line}"
                 for path in sorted(PACKAGE.rglob("*.py")) if path != OWNER
                 for line in unowned_temporaries(path.read_text(encoding="utf-8"))]
    assert offenders == []


@pytest.mark.parametrize("source, found", [
    ("import tempfile\nwith tempfile.TemporaryDirectory(prefix='x_') as d:\n    pass\n", [2]),
    ("from tempfile import mkdtemp\nd = mkdtemp()\n", [2]),
    ("import tempfile\nd = tempfile.mkdtemp(prefix='x', dir=root)\n", []),
    ("import tempfile\nf = tempfile.NamedTemporaryFile()\n", [2]),
])
def test_the_scan_sees_a_planted_maker(source, found):
    assert unowned_temporaries(source) == found
