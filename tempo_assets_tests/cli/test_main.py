"""``tempo``'s dispatcher: building every command's parser (``tempo --help``) stays cheap."""
import json
import subprocess
import sys

from tempo_assets_tests.toolkit import REPO


def test_building_the_parser_imports_neither_pandas_nor_dagster():
    """The command modules import what a command needs when it runs, not when its parser is built (issue 22)."""
    probe = ("import json, sys; from tempo_assets.cli.main import build_parser; build_parser(); "
             "print(json.dumps(sorted(m for m in ('dagster', 'numpy', 'pandas') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [], f"building tempo's parser imports {done.stdout.strip()}"
