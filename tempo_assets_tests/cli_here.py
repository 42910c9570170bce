"""``tempo ARGS`` run in this test process: the command's own code, output and exit status, without the
new interpreter a console script costs (about 2.5 CPU s of imports, and the definitions loaded again).

For the commands that read or settle state after a kill or a concurrent launch (``tempo status``,
``audit-cutoffs``, ``report``, ``test-claim``, ``init``) in test_recovery.py and test_test_once.py: what
those tests guard is what the command says, decides and writes, not how it is started. The launches
that are killed, signalled or raced stay real processes (``toolkit.tempo``, ``script("dagster")``).
Likewise the reads and edits around a materialisation in test_late_method.py (``method add``, ``status``,
``report``), test_archive_changes.py (``release derive``, ``status``, ``report``) and test_headline.py
(``report``).
"""
from __future__ import annotations

import contextlib
import contextvars
import gc
import io
import os
import subprocess
from typing import Mapping


def tempo_here(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess:
    """``tempo ARGS`` with ``os.environ`` replaced by ``env`` for the call (as a subprocess given ``env``
    would see it; anything the command sets there, such as ``DAGSTER_HOME``, is undone after), its
    ``sys.stdout`` and ``sys.stderr`` captured. An argparse exit is the exit status, as in the script."""
    from tempo_assets.cli.main import main

    argv = [str(a) for a in args]
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # in a copy of this thread's context: what the command leaves in Dagster's context variables
            # (an entered instance's defs-state storage) stays there and is collected there, and never
            # becomes a storage of a dead instance that a later definitions load of this test process reads
            code = contextvars.copy_context().run(_main_collected, main, argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["tempo", *argv], code, out.getvalue(), err.getvalue())


def _main_collected(main, argv: list[str]) -> int:
    """``main(argv)``'s exit status (an argparse exit's too), the command's garbage collected before it returns."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        gc.collect()
