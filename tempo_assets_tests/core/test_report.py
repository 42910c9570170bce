"""Plots, HTML, Markdown and TSV reports, on frames built by the project's evaluator."""
from __future__ import annotations

import base64
import io
import re
import struct

import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg

from tempo_assets.core.evaluation import plots, report, scoring
from tempo_assets.core.evaluation import results as report_results
from tempo_assets.core.evaluation import EvalOntology, evaluate_frames
from tempo_assets.core.evaluation.plots import (
    CURVE_PIXELS, LONGITUDINAL_PIXELS, plot_fmax_curve, plot_longitudinal, plot_precision_recall,
)
from tempo_assets.core.evaluation.report import render_archive_report, render_window_report, write_report
from tempo_assets.core.evaluation.results import ReportInputError, results_to_markdown, results_to_tsv
from tempo_assets_tests.core.obo_fixtures import random_terms, write_obo

WINDOWS = ["2014-01-31__2014-09-29__2017-06-15__2019-01-14",
           "2014-09-29__2017-06-15__2019-01-14__2022-09-12"]
METHODS = ["knn", "blast", "naive"]
IMG_RE = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def png_chunk_types(data: bytes) -> list[bytes]:
    types, i = [], 8
    while i < len(data):
        (length,) = struct.unpack(">I", data[i:i + 4])
        types.append(data[i + 4:i + 8])
        i += 12 + length
    return types


def make_curves(tmp_path, seed: int = 0) -> dict[str, pd.DataFrame]:
    """cafaeval df_all frames for three methods, from the real evaluator on a random DAG."""
    rng = np.random.default_rng(seed)
    terms = random_terms(rng, 15)
    obo = write_obo(tmp_path / f"go_{seed}.obo", terms)
    ids = [t["id"] for t in terms]
    ia = pd.Series({t: float(rng.uniform(0.1, 3)) for t in ids})
    ontology = EvalOntology.from_obo(obo, ia=ia)
    proteins = [f"P{i:02d}" for i in range(30)]
    truth = pd.DataFrame({"protein": rng.choice(proteins, 120), "term": rng.choice(ids, 120)})
    curves = {}
    for method in METHODS:
        predictions = pd.DataFrame({"protein": rng.choice(proteins, 300),
                                    "term": rng.choice(ids, 300),
                                    "score": rng.uniform(0, 1, 300)})
        curves[method] = evaluate_frames(ontology, truth, predictions)
    return curves


def make_results(seed: int = 0, derived_window: str | None = WINDOWS[1],
                 profiles: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Random results; with ``profiles`` every row under each (``profile`` column), cluster CIs too."""
    rng = np.random.default_rng(seed)
    rows = []
    for window in WINDOWS:
        for mode in ("PK", "NK", "LK"):  # deliberately not in report order
            for aspect in ("CC", "BP", "MF"):
                for method in METHODS:
                    f = float(rng.uniform(0.2, 0.7))
                    for profile in (profiles or (None,)):
                        extra = {} if profile is None else dict(
                            profile=profile, f_at_valid_tau_cluster_low=f - 0.1, f_at_valid_tau_cluster_high=f + 0.04,
                            f_micro_w_at_valid_tau=f - 0.06)
                        rows.append(dict(
                        **extra, window=window, mode=mode, aspect=aspect, method=method, f_at_valid_tau=f - 0.02,
                        f_at_valid_tau_low=f - 0.07, f_at_valid_tau_high=f + 0.01, fmax_oracle=f,
                        fmax_oracle_low=f - 0.04, fmax_oracle_high=f + 0.03, wfmax=f - 0.1,
                        smin=float(rng.uniform(3, 20)), f_micro_w=f - 0.05,
                        coverage=float(rng.uniform(0.4, 1)), valid_tau=float(rng.integers(1, 99)) / 100,
                        wf_at_valid_tau=f - 0.12, s_at_valid_tau=float(rng.uniform(3, 20)),
                        tau_oracle=float(rng.integers(1, 99)) / 100, n_targets=int(rng.integers(5, 900)), derived=window == derived_window))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def curves(tmp_path_factory):
    return make_curves(tmp_path_factory.mktemp("curves"))


# --------------------------------------------------------------------------------------------
# plots


@pytest.mark.parametrize("plot", [plot_fmax_curve, plot_precision_recall])
@pytest.mark.parametrize("ns", ["BP", "molecular_function"])
def test_curve_plots_are_stable_pngs(curves, tmp_path, plot, ns):
    path = tmp_path / "plot.png"
    data = plot(curves, ns, path)
    assert path.read_bytes() == data
    assert png_size(data) == CURVE_PIXELS
    assert b"tEXt" not in png_chunk_types(data) and b"Software" not in data
    assert plot(curves, ns) == data  # byte-stable
    pixels = mpimg.imread(io.BytesIO(data))
    assert pixels.shape[:2] == (CURVE_PIXELS[1], CURVE_PIXELS[0])
    assert pixels[..., :3].std() > 0.05  # something was drawn


def test_curve_plots_on_kept_figures_are_the_bytes_of_fresh_figures(curves, tmp_path):
    """``CurveFigures`` keeps one figure per kind across a report's plots: each PNG is the one a figure of
    its own gives, whatever was drawn on the kept figure before (other methods, taus, weighting)."""
    other = make_curves(tmp_path, seed=1)
    asked = [(plot_fmax_curve, curves, "BP", {"knn": 0.5}, False), (plot_precision_recall, curves, "BP", None, False),
             (plot_fmax_curve, {"naive": other["naive"]}, "MF", None, True),
             (plot_precision_recall, other, "CC", {"blast": 0.3}, True), (plot_fmax_curve, other, "CC", None, False),
             (plot_precision_recall, {"knn": curves["knn"]}, "MF", {"knn": 0.2}, False)]
    with plots.CurveFigures() as figures:
        kept = [plot(group, ns, taus=taus, weighted=weighted, figures=figures)
                for plot, group, ns, taus, weighted in asked]
    fresh = [plot(group, ns, taus=taus, weighted=weighted) for plot, group, ns, taus, weighted in asked]
    assert len(set(fresh)) == len(asked)
    assert kept == fresh
    with pytest.raises(RuntimeError, match="inside its with-block"):
        plot_fmax_curve(curves, "BP", figures=plots.CurveFigures())


def test_curve_plot_depends_on_marked_tau(curves):
    plain = plot_fmax_curve(curves, "CC")
    assert plot_fmax_curve(curves, "CC", taus={"knn": 0.5}) != plain


def test_curve_plot_accepts_column_frames_and_rejects_bad(curves):
    flat = {m: df.reset_index() for m, df in curves.items()}
    assert plot_fmax_curve(flat, "BP") == plot_fmax_curve(curves, "BP")
    with pytest.raises(ReportInputError, match="lacks columns"):
        plot_fmax_curve({"knn": curves["knn"].drop(columns=["f"])}, "BP")
    with pytest.raises(ReportInputError, match="namespace"):
        plot_fmax_curve(curves, "no_such_namespace")


def test_longitudinal_plot_png(tmp_path):
    results = make_results()
    data = plot_longitudinal(results, "fmax_oracle", tmp_path / "long.png")
    assert png_size(data) == LONGITUDINAL_PIXELS
    assert (tmp_path / "long.png").read_bytes() == data
    assert plot_longitudinal(results.sample(frac=1, random_state=1), "fmax_oracle") == data
    assert plot_longitudinal(results, "smin") != data
    with pytest.raises(ReportInputError, match="no column"):
        plot_longitudinal(results, "auc")



def test_longitudinal_panels_are_scaled_to_every_line_drawn(monkeypatch):
    """The panels share one y range that holds every method's line and band (scaled once, after the
    lines are drawn), the x range the windows; drawn with matplotlib's autoscaling as each line went in."""
    figures = []
    monkeypatch.setattr(plots, "_png_bytes", lambda figure: figures.append(figure) or b"")
    results = make_results()
    results = results.assign(smin=results["smin"] * 40 + 3, smin_low=results["smin"] * 40 + 2,
                             smin_high=results["smin"] * 40 + 4)
    plot_longitudinal(results, "smin")
    low, high = figures[0].axes[0].get_ylim()
    assert low <= results["smin_low"].min() and high >= results["smin_high"].max()
    span = results["smin_high"].max() - results["smin_low"].min()
    assert results["smin_low"].min() - low < 0.1 * span and high - results["smin_high"].max() < 0.1 * span
    assert all(ax.get_ylim() == (low, high) for ax in figures[0].axes)
    assert figures[0].axes[0].get_xlim() == (-0.5, len(WINDOWS) - 0.5)

def reference_point(rows: pd.DataFrame, tau):
    """Loop version of the marked point: first maximum, or the row at tau (0 when absent)."""
    if tau is None:
        best = None
        for t, f in zip(rows["tau"], rows["f"]):
            if best is None or f > best[1]:
                best = (t, f)
        return best
    for t, f in zip(rows["tau"], rows["f"]):
        if abs(t - tau) < 1e-9:
            return (t, f)
    return (tau, 0.0)


@pytest.mark.parametrize("tau", [None, 0.01, 0.37, 0.995])
def test_marked_point_matches_reference(curves, tau):
    rows = plots._curve_rows(curves["blast"], "BP", False, "blast")
    got = plots._point_at(rows, tau)
    assert got[:2] == pytest.approx(reference_point(rows, tau))


# --------------------------------------------------------------------------------------------
# HTML


def _images(html_text: str) -> list[bytes]:
    return [base64.b64decode(b64) for b64 in IMG_RE.findall(html_text)]


def _assert_self_contained(html_text: str) -> None:
    assert html_text.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html_text)
    assert "<script" not in html_text and "<link" not in html_text
    assert "Content-Security-Policy" in html_text


def test_window_report_one_image_per_plot_and_derived_marker(curves):
    results = make_results()
    html_text = render_window_report(WINDOWS[1], results, curves, {"cutoff": "2019-01-14"})
    _assert_self_contained(html_text)
    images = _images(html_text)
    assert html_text.count("<img") == len(images) == 2 * 3  # (F curve + PR) x 3 namespaces
    assert all(png_size(png) == CURVE_PIXELS for png in images)
    # every metric cell of a derived row carries the marker; the legend says what it means
    rows = [r for r in html_text.split("<tr") if 'class="derived-row"' in r[:30]]
    assert len(rows) == 27
    metric_columns = [c for c, _, _ in report_results._TABLE if c in results.columns]
    assert len(metric_columns) == 10
    assert all(r.count('<sup class="derived"') == len(metric_columns) for r in rows)  # one per metric column
    assert 'id="derived-legend"' in html_text and "derived</em> release" in html_text
    # the oracle numbers are labelled as such under every table
    assert html_text.count("best threshold on TEST — not a protocol number") >= 3
    assert "2019-01-14" in html_text  # provenance value shown


def test_window_report_marks_each_profile_labelled_line_at_its_own_valid_tau(curves):
    """The benchmark draws both profiles, each line labelled ``<method> [<profile>]``: each is marked at
    its profile's VALID threshold, as the caption says (they were marked at their own maximum)."""
    results = make_results(profiles=("cafaeval", "lafa"))
    labelled = {report_results.profile_label(m, p): frame for m, frame in curves.items() for p in ("cafaeval", "lafa")}
    html_text = render_window_report(WINDOWS[0], results, {"NK": labelled}, {})
    rows = results.query("window == @WINDOWS[0] and mode == 'NK' and aspect == 'BP'")
    taus = {report_results.profile_label(m, p): t for m, p, t in zip(rows["method"], rows["profile"], rows["valid_tau"])}
    assert len(set(taus.values())) > len(METHODS)  # the two profiles' thresholds differ
    assert plot_fmax_curve(labelled, "BP", taus=taus) in _images(html_text)
    assert plot_precision_recall(labelled, "BP", taus=taus) in _images(html_text)


def test_window_report_shows_the_plots_already_drawn_without_drawing_them_again(curves, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a plot was drawn again")

    monkeypatch.setattr(report, "plot_fmax_curve", refuse)
    monkeypatch.setattr(report, "plot_precision_recall", refuse)
    drawn = {("NK", a): plots.CellPlots(fmax=f"fmax {a}".encode(), pr=f"pr {a}".encode()) for a in ("BP", "MF", "CC")}
    html_text = render_window_report(WINDOWS[0], make_results(), {"NK": curves}, {}, drawn=drawn)
    assert _images(html_text) == [f"{kind} {a}".encode() for a in ("BP", "MF", "CC") for kind in ("fmax", "pr")]


def test_markdown_labels_the_oracle_columns():
    text = report_results.results_to_markdown(make_results())
    header = text.splitlines()[0]
    assert header.index("F at VALID tau") < header.index("Fmax oracle*")
    assert "* Fmax oracle, \u03c4 oracle, wFmax, Smin: best threshold on TEST — not a protocol number." in text


def test_window_report_without_derived_has_no_marker(curves):
    html_text = render_window_report(WINDOWS[0], make_results(), curves, None)
    assert 'class="derived"' not in html_text and "derived-legend" not in html_text
    assert "&tau;" in html_text and "0.30" not in html_text.split("<h2>Scores")[0]


def test_window_report_per_mode_curves_use_valid_tau(curves):
    results = make_results()
    nested = {"NK": curves, "PK": {"knn": curves["knn"]}}
    html_text = render_window_report(WINDOWS[0], results, nested, {})
    assert len(_images(html_text)) == 2 * 3 * 2
    assert "VALID-fixed" in html_text and "own maximum" not in html_text
    tau = results.query("window == @WINDOWS[0] and mode == 'PK' and aspect == 'BP' "
                        "and method == 'knn'")["valid_tau"].item()
    expected = plot_fmax_curve({"knn": curves["knn"]}, "BP", taus={"knn": tau})
    assert expected in _images(html_text)


def test_window_report_escapes_text(curves):
    results = make_results().assign(method=lambda f: f["method"] + "<b>")
    html_text = render_window_report(WINDOWS[0], results, {}, {"note": "<script>x</script>"})
    assert "<b>" not in html_text and "<script>" not in html_text
    assert "knn&lt;b&gt;" in html_text


def test_archive_report(curves):
    results = make_results()
    # each window under its catalog status, a stale one with why (the catalog asset passes every window's)
    statuses = {WINDOWS[0]: ("ready", ""), WINDOWS[1]: ("stale", "method m@1 registered since <w>")}
    html_text = render_archive_report(results, {"archive": "data/"}, statuses)
    _assert_self_contained(html_text)
    images = _images(html_text)
    assert len(images) == html_text.count("<img") == 4  # F at the VALID tau, oracle Fmax, wfmax, smin
    assert all(png_size(png) == LONGITUDINAL_PIXELS for png in images)
    assert images[0] == plot_longitudinal(results, "f_at_valid_tau")
    assert 'class="derived"' in html_text and 'id="derived-legend"' in html_text
    for window in WINDOWS:
        assert f"<h3>{window}</h3>" in html_text
    assert html_text.count("status: ready") == 1 and html_text.count("status: stale") == 1
    stale = html_text.index("status: stale")
    assert html_text.index(f"<h3>{WINDOWS[1]}</h3>") < stale < html_text.index("</table>", stale)
    assert "status: stale</strong>: method m@1 registered since &lt;w&gt;" in html_text
    # a plot the catalog already drew (its longitudinal page) is put in as given, not drawn again
    drawn = {"f_at_valid_tau": images[0]}
    assert render_archive_report(results, {"archive": "data/"}, statuses, drawn=drawn) == html_text
    given = _images(render_archive_report(results, None, drawn={"f_at_valid_tau": images[1]}))
    assert given[0] == images[1] and given[1:] == images[1:]
    no_derived = render_archive_report(
        make_results(derived_window=None).drop(columns=["wfmax", "smin"]), None)
    assert no_derived.count("<img") == 2 and "status:" not in no_derived
    assert 'class="derived"' not in no_derived


def test_gate_banner_heads_the_body_and_escapes_reasons(curves):
    page = render_archive_report(make_results(), None)
    bannered = report.with_gate_banner(page, "fail", "FAILED QUALITY GATE", ["feature <own_count> leaks"])
    assert bannered.index('id="quality-gate"') < bannered.index("<h1")
    assert bannered.index("<body>") < bannered.index('id="quality-gate"')
    assert "feature &lt;own_count&gt; leaks" in bannered and "<own_count>" not in bannered
    assert bannered.replace(bannered[bannered.index("<div id=\"quality-gate\""):bannered.index("</div>") + 6]
                            + "\n", "", 1) == page  # only the banner was added
    assert "<ul>" not in report.with_gate_banner(page, "pass", "Quality gate: pass", [])
    # a page that already carries a banner (an earlier `tempo report` on the catalog's own page) gets the new one only
    again = report.with_gate_banner(bannered, "pass", "Quality gate: pass", [])
    assert again == report.with_gate_banner(page, "pass", "Quality gate: pass", []) and again.count("quality-gate") == 1
    with pytest.raises(ReportInputError, match="verdict"):
        report.with_gate_banner(page, "maybe", "x", [])
    with pytest.raises(ReportInputError, match="no <body>"):
        report.with_gate_banner("<p>no page</p>", "pass", "x", [])


def test_bad_results_are_named():
    results = make_results()
    with pytest.raises(ReportInputError, match=r"lacks columns \['derived'\]"):
        render_archive_report(results.drop(columns=["derived"]), None)
    broken = results.astype({"derived": object})
    broken.loc[5, "derived"] = None
    with pytest.raises(ReportInputError, match="row 5: derived"):
        results_to_tsv(broken)
    with pytest.raises(ReportInputError, match="aspect 'XX'"):
        results_to_markdown(results.assign(aspect="XX"))
    with pytest.raises(ReportInputError, match="no row for window"):
        render_window_report("1999-01-01", results, {}, None)


def test_write_report_is_atomic(tmp_path):
    path = tmp_path / "out" / "report.html"
    write_report(path, "<html>first</html>")
    assert path.read_text() == "<html>first</html>"
    with pytest.raises(ReportInputError):
        write_report(path, b"bytes")
    assert path.read_text() == "<html>first</html>"
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]


# --------------------------------------------------------------------------------------------
# Markdown and TSV


def test_markdown_table():
    results = make_results()
    text = results_to_markdown(results)
    lines = text.splitlines()
    body = [line for line in lines[2:] if line.startswith("| ")]
    assert len(body) == len(results)
    assert all(line.count(" | ") == lines[0].count(" | ") for line in body)
    # a derived row is marked once, in its `derived` column; the caveat is written once
    derived_lines = [line for line in body if line.endswith("| yes |")]
    assert len(derived_lines) == int(results["derived"].sum())
    assert all(line.startswith(f"| {WINDOWS[1]}") for line in derived_lines)
    assert text.count(report_results.DERIVED_CAVEAT) == 1 and "(derived)" not in text
    # the legend says what each column means and labels the oracle numbers
    assert "**Legend**" in text and report_results.ORACLE_NOTE in text
    assert all(f"`{column}`" in text for column, _ in report_results.COLUMN_LEGEND)
    first = results.iloc[0]
    assert f"{first['fmax_oracle']:.3f} [{first['fmax_oracle_low']:.3f}, {first['fmax_oracle_high']:.3f}]" in text
    assert (f"{first['f_at_valid_tau']:.3f} [{first['f_at_valid_tau_low']:.3f}, "
            f"{first['f_at_valid_tau_high']:.3f}]") in text
    # NK before LK before PK, BP before MF before CC
    order = [tuple(line.split(" | ")[1:3]) for line in body[:9]]
    assert order[0] == ("NK", "BP") and order[3] == ("NK", "MF") and order[-1] == ("NK", "CC")


def test_tsv_round_trip():
    results = make_results()
    text = results_to_tsv(results)
    back = pd.read_csv(io.StringIO(text), sep="\t")
    assert list(back.columns) == [c for c in report_results.RESULT_COLUMNS if c in results.columns]
    # the headline leads, at each method's VALID threshold, for every method
    assert report_results.RESULT_COLUMNS[5:14] == ["f_at_valid_tau", "valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high",
                                           "f_at_valid_tau_cluster_low", "f_at_valid_tau_cluster_high",
                                           "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau"]
    assert len(back) == len(results)
    key = ["window", "mode", "aspect", "method"]
    merged = back.merge(results, on=key, suffixes=("", "_orig"))
    assert len(merged) == len(results)
    for column in ("f_at_valid_tau", "fmax_oracle", "fmax_oracle_low", "smin", "valid_tau", "coverage"):
        np.testing.assert_allclose(merged[column], merged[column + "_orig"], rtol=1e-5)
    assert (merged["n_targets"] == merged["n_targets_orig"]).all()
    assert (merged["derived"] == merged["derived_orig"]).all()


def test_both_profiles_lafa_first_with_their_statements():
    results = make_results(profiles=("cafaeval", "lafa"))  # given in the other order
    text = results_to_markdown(results)
    assert text.index("### Profile `lafa`") < text.index("### Profile `cafaeval`")
    for profile, statement in scoring.PROFILE_STATEMENTS.items():
        assert text.count(statement) == 1, profile
    first = results.iloc[0]
    # protein-level [low, high] then cluster-level c[low, high]
    assert (f"{first['f_at_valid_tau']:.3f} [{first['f_at_valid_tau_low']:.3f}, {first['f_at_valid_tau_high']:.3f}] "
            f"c[{first['f_at_valid_tau_cluster_low']:.3f}, {first['f_at_valid_tau_cluster_high']:.3f}]") in text
    back = pd.read_csv(io.StringIO(results_to_tsv(results)), sep="\t")
    assert list(back.columns[:5]) == ["window", "profile", "mode", "aspect", "method"]
    assert set(back["profile"]) == {"lafa", "cafaeval"}
    assert back.groupby("profile").size().to_dict() == {"lafa": len(results) // 2, "cafaeval": len(results) // 2}
    assert back["profile"].iloc[0] == "lafa"  # report order: LAFA's first within a window
    html = render_archive_report(results, {"windows": list(WINDOWS)})
    assert html.index("Profile lafa") < html.index("Profile cafaeval")


@pytest.mark.parametrize("p, n_boot, text", [(0.0, 100, "< 0.01"), (0.0, 1000, "< 0.001"), (0.04, 100, "0.04"),
                                             (float("nan"), 100, "\u2013"), (None, 100, "\u2013"), (0.0, None, "< 1/n_boot")])
def test_p_values_are_never_zero(p, n_boot, text):
    assert report_results.format_p_value(p, n_boot) == text


def test_interval_tables_print_no_nan_and_no_zero_p():
    decay = pd.DataFrame({"profile": ["lafa", "cafaeval"], "method": ["naive", "knn"], "mode": "NK", "aspect": "MF",
                          "delta": [0.1, float("nan")], "delta_low": [0.05, float("nan")], "p_value": [0.0, 0.5],
                          "note": [None, float("nan")]})
    text = report_results.interval_table_markdown(decay, 100)
    assert "nan" not in text.lower() and "< 0.01" in text and "| 0 " not in text and "0.1000" in text


def test_provenance_is_a_table_not_json():
    html = report._provenance_table({"window": "w", "catalog": [{"window": "a", "status": "ready"},
                                                                {"window": "b", "status": "stale"}],
                                     "clusters": {"n_clusters": 5, "min_identity": 30.0}, "profiles": ["lafa", "cafaeval"]})
    assert "<pre>" not in html and "{" not in html and "<th class=\"text\">status</th>" in html
    assert "lafa, cafaeval" in html and "<td class=\"text\">stale</td>" in html
    text = report.provenance_markdown({"window": "w", "catalog": [{"window": "a", "status": "ready"}]})
    assert text.startswith("| key | value |") and re.search(r"\| window +\| status +\|", text) and "{" not in text


def test_identity_strata_plot_and_markdown():
    rows = [dict(window=WINDOWS[0], profile=profile, method=method, mode=mode, aspect=aspect, identity_stratum=stratum,
                 n_targets=n, valid_tau=0.3, f_at_valid_tau=f, derived=False)
            for profile in ("lafa", "cafaeval") for method in METHODS for mode in ("NK", "PK") for aspect in ("BP", "MF")
            for stratum, n, f in (("<30", 10, 0.2), ("30-60", 5, 0.4), (">=90", 1, 0.9))]
    strata = pd.DataFrame(rows)
    png = plots.plot_identity_strata(strata[strata["profile"] == "lafa"])
    assert png_size(png) == plots.LONGITUDINAL_PIXELS
    text = report_results.strata_to_markdown(strata)
    assert text.index("profile `lafa`") < text.index("profile `cafaeval`")
    assert "0.900 (n=1)" in text and "| <30 " in text and "60-90" not in text.split("Each cell")[0]
    with pytest.raises(ReportInputError):
        plots.plot_identity_strata(strata.drop(columns=["n_targets"]))


def _reference_window_line(ax, rows, color, metric, x_of):
    """The facet plots' per-method drawing as it was: pandas sorting, a line and two marker lines each."""
    if rows.empty:
        return
    rows = rows.assign(x=rows["window"].map(x_of)).sort_values("x")
    x, y = rows["x"].to_numpy(float), rows[metric].to_numpy(float)
    low, high = f"{metric}_low", f"{metric}_high"
    if low in rows.columns and high in rows.columns:
        lo, hi = rows[low].to_numpy(float), rows[high].to_numpy(float)
        ok = np.isfinite(lo) & np.isfinite(hi)
        ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.18, lw=0)
        ax.vlines(x[ok], lo[ok], hi[ok], color=color, lw=1, alpha=0.7)
    ax.plot(x, y, "-", color=color, lw=1.6)
    derived = rows["derived"].to_numpy(bool)
    ax.plot(x[~derived], y[~derived], "o", color=color, ms=6)
    ax.plot(x[derived], y[derived], "o", mfc="white", mec=color, mew=1.6, ms=7)


def _reference_strata_draw(x_of):
    def draw(ax, rows, color):
        rows = rows.assign(x=rows["identity_stratum"].map(x_of)).dropna(subset=["x"]).sort_values("x")
        if not rows.empty:
            ax.plot(rows["x"], rows["f_at_valid_tau"].astype(float), "o-", color=color, lw=1.5, ms=5)
    return draw


@pytest.mark.parametrize("derived_window", [None, WINDOWS[1], "every"])
def test_facet_plots_are_the_pixels_of_the_reference_drawing(monkeypatch, derived_window):
    """The longitudinal and identity-strata figures' bytes equal those of the reference drawing (pandas
    per method, a markers line beside each line, empty marker lines drawn): lines with no derived point,
    some, all; bands missing for some rows; rows in shuffled order; a stratum outside the plot's x."""
    results = make_results(derived_window=None if derived_window == "every" else derived_window)
    results = results.assign(derived=True) if derived_window == "every" else results
    results.loc[results.index[::7], "f_at_valid_tau_low"] = np.nan
    results = results.sample(frac=1, random_state=3)
    strata = pd.DataFrame([dict(method=method, mode=mode, aspect=aspect, identity_stratum=stratum, n_targets=n,
                                f_at_valid_tau=f + 0.01 * i)
                           for i, method in enumerate(METHODS) for mode in ("NK", "PK") for aspect in ("BP", "MF")
                           for stratum, n, f in ((">=90", 1, 0.9), ("<30", 10, 0.2), ("none", 2, 0.5),
                                                 ("30-60", 5, 0.4))]).sample(frac=1, random_state=4)
    fast = [plot_longitudinal(results, metric) for metric in ("f_at_valid_tau", "fmax_oracle", "smin")]
    fast.append(plots.plot_identity_strata(strata))
    monkeypatch.setattr(plots, "_draw_window_line", _reference_window_line)
    original = plots._facet_plot

    def reference_facets(frame, facets, draw, path):
        if "identity_stratum" in frame.columns:
            draw = _reference_strata_draw({label: i for i, label in enumerate(plots.IDENTITY_STRATA)})
        return original(frame, facets, draw, path)

    monkeypatch.setattr(plots, "_facet_plot", reference_facets)
    reference = [plot_longitudinal(results, metric) for metric in ("f_at_valid_tau", "fmax_oracle", "smin")]
    reference.append(plots.plot_identity_strata(strata))
    assert len(set(reference)) == len(reference)
    assert fast == reference


def test_facet_plot_hands_each_method_its_own_rows(monkeypatch):
    """Every row of a panel reaches the drawing once, with its own method (a split by method, not a mask each)."""
    results = make_results().sample(frac=1, random_state=5)
    seen = []
    monkeypatch.setattr(plots, "_draw_window_line",
                        lambda ax, rows, color, metric, x_of: seen.append((color, rows)))
    plot_longitudinal(results, "fmax_oracle")
    colors = plots._method_colors(sorted(METHODS))
    drawn = pd.concat([rows for _, rows in seen])
    assert sorted(drawn.index) == sorted(results.index)
    assert all((rows["method"] == method).all() for color, rows in seen
               for method in [m for m, c in colors.items() if c == color])
