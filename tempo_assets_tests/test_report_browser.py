"""A rendered report opens in headless Chromium and every inlined image decodes and shows."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from tempo_assets.core.evaluation.plots import CURVE_PIXELS
from tempo_assets.core.evaluation.report import render_window_report, write_report
from tempo_assets_tests.core.test_report import WINDOWS, make_curves, make_results
from tempo_assets_tests.toolkit import chromium, needs_chromium

pytestmark = needs_chromium
WIDTH, HEIGHT = 1200, 2000
# Appended to a copy of the report only (the report itself carries no script): once every
# image has loaded, list each one's load state and decoded size in an element --dump-dom shows.
CHECK_SCRIPT = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("img").forEach(function (img) {
    out.push((img.complete ? "ok" : "pending") + ":" + img.naturalWidth + "x" + img.naturalHeight);
  });
  var pre = document.createElement("pre");
  pre.id = "tempo-img-check";
  pre.textContent = out.join(" ");
  document.body.appendChild(pre);
});
</script>"""


def run_chromium(args: list[str], home: Path, timeout: float = 30) -> str:
    """Run headless Chromium in its own process group; kill that group if it overruns."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={home / 'profile'}",
               *args]
    env = dict(os.environ, HOME=str(home))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium ran past {timeout}s: {' '.join(command)}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {err[-2000:]}"
    return out


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    results = make_results()
    # one mode, one aspect, so the plots sit inside the first screen
    results = results[(results["mode"] == "NK") & (results["aspect"] == "BP")]
    curves = make_curves(folder)
    curves = {m: df.loc[["biological_process"]] for m, df in curves.items()}
    html_text = render_window_report(WINDOWS[1], results, curves, {"cutoff": "2019-01-14"})
    return write_report(folder / "report.html", html_text), html_text


def test_report_images_decode_in_chromium(report_file, tmp_path):
    path, html_text = report_file
    n_images = html_text.count("<img")
    assert n_images == 2
    probe = tmp_path / "probe.html"
    # the copy's CSP also allows its inline check script
    probe.write_text(html_text.replace("</body>", CHECK_SCRIPT + "</body>")
                     .replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"),
                     encoding="utf-8")
    dom = run_chromium(["--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], tmp_path)
    found = re.search(r'<pre id="tempo-img-check">([^<]*)</pre>', dom)
    assert found, "the check script did not run"
    states = found.group(1).split()
    assert states == [f"ok:{CURVE_PIXELS[0]}x{CURVE_PIXELS[1]}"] * n_images


def test_report_screenshot_shows_plots(report_file, tmp_path):
    path, _ = report_file
    shot = tmp_path / "shot.png"
    run_chromium([f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", path.as_uri()],
                 tmp_path)
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    assert pixels.std() > 0.05, "blank page"
    # matplotlib's first two line colours are in the plots and nowhere else on the page
    for colour in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)):
        close = np.abs(pixels * 255 - np.array(colour)).max(axis=2) < 25
        assert close.sum() > 200, f"colour {colour} of the plots not on screen"
    # the derived marker is drawn in its own colour (the window rests on a derived release)
    marker = np.abs(pixels * 255 - np.array((0xA3, 0x47, 0x00))).max(axis=2) < 30
    assert marker.sum() > 20
