"""Figures with 50 detectors: nothing clipped, nothing overlapping, a highlighted few, one shift
direction (smaller -> larger, left to right / bottom to top)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from tests.report.conftest import make_run

from semshift.report import figures as F
from semshift.report import load_run
from semshift.report._load import RunData
from semshift.report.figure_style import GREY, pick_highlights, shift_order

#: 50 detectors: msp among them, a failing one, and long names that stress legends and ticks.
DETECTORS = (
    [f"det{k:02d}" for k in range(20)]
    + ["msp", "broken", "weighted_energy_ensemble_detector", "mahalanobis_relative_long"]
    + [f"detector_{k:02d}" for k in range(26)]
)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    assert len(DETECTORS) == 50
    root = make_run(
        tmp_path_factory.mktemp("many") / "out",
        detectors=DETECTORS,
        protocols=("osr", "decomposition", "graded", "sanity"),
        n_id=120,
        n_ood=40,
        bootstrap=0,
    )
    return load_run(root)


def _sensitivity(detectors: list[str]) -> pd.DataFrame:
    rows = []
    for d in detectors:
        for param, cands in (("temperature", ["0.5", "1", "2", "5", "10", "100"]), ("k", ["5"])):
            for j, c in enumerate(cands):
                rows.append(
                    {
                        "detector": d,
                        "parameter": param,
                        "candidate": c,
                        "objective": "auroc",
                        "value": 0.6 + 0.05 * j if j != 2 else np.nan,
                        "chosen": j == 1,
                        "others": "k=5, noise=0.0014, percentile=90" if param != "k" else "",
                    }
                )
    return pd.DataFrame(rows)


def _all_figures(run: RunData) -> Iterator[tuple[str, Figure]]:
    res = run.results
    builders: dict[str, Callable[[], Figure | list[Figure] | None]] = {
        "level_curves": lambda: F.level_curves_figure(res),
        "oscr": lambda: F.oscr_figure(run),
        "decomposition": lambda: F.decomposition_figure(res),
        "sanity": lambda: F.sanity_figure(res),
        "heatmaps": lambda: F.grid_heatmap_figures(res, "auroc"),
        "histograms": lambda: F.score_histogram_figures(run),
        "search": lambda: F.search_sensitivity_figures(_sensitivity(list(DETECTORS))),
    }
    for name, build in builders.items():
        made = build()
        figs = made if isinstance(made, list) else [made]
        assert figs and all(isinstance(f, Figure) for f in figs), name
        for k, f in enumerate(figs):
            yield f"{name}[{k}]", f


def _shown(artist: Artist) -> bool:
    return artist.get_visible() and (not isinstance(artist, Text) or bool(artist.get_text()))


def _tick_labels(ax) -> Iterator[tuple[str, Text]]:  # type: ignore[no-untyped-def]
    """The tick labels Agg draws: visible, non-empty, at a tick inside the view interval."""
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        lo, hi = sorted(axis.get_view_interval())
        eps = 1e-9 * max(1.0, abs(hi - lo))
        for tick in axis.get_major_ticks():
            if not lo - eps <= tick.get_loc() <= hi + eps:
                continue
            for label in (tick.label1, tick.label2):
                if _shown(label):
                    yield f"{name} tick {label.get_text()!r}", label


def _texts(fig: Figure) -> list[tuple[str, Artist]]:
    """Every label a reader needs: titles, legends, axis and tick labels, annotations."""
    out: list[tuple[str, Artist]] = [("figure text", t) for t in fig.texts if _shown(t)]
    out += [("figure legend", leg) for leg in fig.legends]
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        where = f"axes {k} ({ax.get_title()!r})"
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            if _shown(t):
                out.append((f"{where} label {t.get_text()!r}", t))
        out += [(f"{where} {n}", t) for n, t in _tick_labels(ax)]
        out += [(f"{where} text {t.get_text()!r}", t) for t in ax.texts if _shown(t)]
        if ax.get_legend() is not None:
            out.append((f"{where} legend", ax.get_legend()))
    return out


def _overlap(a: Bbox, b: Bbox, tol: float = 0.5) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def assert_readable(fig: Figure, name: str) -> None:
    """Every label inside the canvas; legends clear of titles, panels and each other; titles
    clear of each other; the tick labels of one axis clear of each other."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = fig.bbox
    boxes = [(what, a.get_window_extent(renderer)) for what, a in _texts(fig)]
    for what, bb in boxes:
        inside = (
            bb.x0 >= canvas.x0 - 1
            and bb.y0 >= canvas.y0 - 1
            and bb.x1 <= canvas.x1 + 1
            and bb.y1 <= canvas.y1 + 1
        )
        assert inside, f"{name}: {what} {bb.bounds} outside the canvas {canvas.bounds}"
    titles = [(w, a.get_window_extent(renderer)) for w, a in _titles(fig)]
    legends = [(w, b) for w, b in boxes if w.endswith("legend")]
    panels = [
        (f"axes {k}", ax.get_window_extent(renderer))
        for k, ax in enumerate(fig.axes)
        if ax.get_visible() and ax.axison
    ]
    for wl, bl in legends:
        for wt, bt in titles:
            assert not _overlap(bl, bt), f"{name}: {wl} overlaps {wt}"
        if wl == "figure legend":
            for wp, bp in panels:
                assert not _overlap(bl, bp), f"{name}: {wl} overlaps {wp}"
    for i, (wa, ba) in enumerate(legends):
        for wb, bb in legends[i + 1 :]:
            assert not _overlap(ba, bb), f"{name}: {wa} overlaps {wb}"
    for i, (wa, ba) in enumerate(titles):
        for wb, bb in titles[i + 1 :]:
            assert not _overlap(ba, bb), f"{name}: {wa} overlaps {wb}"
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        for axis in ("x", "y"):
            ticks = [t.get_window_extent(renderer) for n, t in _tick_labels(ax) if n[0] == axis]
            for i, a in enumerate(ticks):
                for b in ticks[i + 1 :]:
                    assert not _overlap(a, b, tol=1.0), f"{name}: axes {k} {axis} ticks overlap"


def _titles(fig: Figure) -> list[tuple[str, Text]]:
    """The figure's title texts and every panel title."""
    out = [("figure title", t) for t in fig.texts if _shown(t)]
    for k, ax in enumerate(fig.axes):
        if ax.get_visible() and ax.axison and _shown(ax.title):
            out.append((f"axes {k} title {ax.get_title()!r}", ax.title))
    return out


def test_every_figure_fits_its_canvas_with_50_detectors(many: RunData) -> None:
    names = []
    for name, fig in _all_figures(many):
        assert_readable(fig, name)
        names.append(name)
    assert {n.split("[")[0] for n in names} == {
        "level_curves",
        "oscr",
        "decomposition",
        "sanity",
        "heatmaps",
        "histograms",
        "search",
    }


def test_figures_fit_with_one_detector(tmp_path: Path) -> None:
    run = load_run(
        make_run(
            tmp_path / "one",
            detectors=["a_single_detector_with_a_long_name"],
            protocols=("osr", "decomposition", "graded", "sanity"),
            n_id=60,
            n_ood=20,
            bootstrap=0,
        )
    )
    res = run.results
    figs = [
        F.level_curves_figure(res),
        F.oscr_figure(run),
        F.decomposition_figure(res),
        F.sanity_figure(res),
        *F.grid_heatmap_figures(res, "auroc"),
        *F.score_histogram_figures(run),
    ]
    for k, fig in enumerate(figs):
        assert fig is not None
        assert_readable(fig, f"figure {k}")


def _coloured(ax) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Detector -> colour of each non-grey line of a panel (the label's first word)."""
    return {
        str(ln.get_label()).split(" ")[0]: to_hex(ln.get_color())
        for ln in ax.lines
        if to_hex(ln.get_color()) != GREY
    }


def _assert_highlight(coloured: dict[str, str], summary: pd.Series) -> None:
    """MSP, two best and two worst by ``summary`` (higher = better; ties either way) coloured,
    in distinct colours."""
    assert "msp" in coloured and len(coloured) == 5
    assert len(set(coloured.values())) == len(coloured)  # distinct colours
    values = summary.sort_values(ascending=False)
    others = summary.drop("msp")
    chosen = sorted((summary[d] for d in coloured if d != "msp"), reverse=True)
    ranked = others.sort_values(ascending=False).to_list()
    assert chosen[:2] == ranked[:2] and chosen[2:] == ranked[-2:]
    assert values.iloc[0] > values.iloc[-1]


def test_level_curves_highlight_msp_best_and_worst(many: RunData) -> None:
    res = many.results
    fig = F.level_curves_figure(res)
    assert fig is not None
    ok = res[res["error"].isna() & res["value"].notna() & res["detector"].notna()]
    points = ok[
        ((ok["protocol"] == "osr") & (ok["metric"] == "auroc"))
        | (
            (ok["protocol"] == "graded")
            & (ok["metric"] == "auroc.level_mean")
            & ok["covariate_level"].isna()
        )
    ]
    summary = points.groupby("detector")["value"].mean()
    for ax in [a for a in fig.axes if a.lines]:
        coloured = _coloured(ax)
        _assert_highlight(coloured, summary)
        grey = [ln for ln in ax.lines if to_hex(ln.get_color()) == GREY]
        assert len(grey) + len(coloured) == len(ax.lines) >= 45
        assert all(str(ln.get_label()).startswith("_") for ln in grey)  # not in the legend
        assert max(ln.get_zorder() for ln in grey) < min(
            ln.get_zorder() for ln in ax.lines if ln not in grey
        )
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("msp (reference")
    assert legend[-1] == "45 other detectors"


def test_oscr_highlight_by_mean_oscr_and_panels_small_to_large_shift(many: RunData) -> None:
    res = many.results
    fig = F.oscr_figure(many)
    assert fig is not None
    axes = [ax for ax in fig.axes if ax.lines]
    assert [ax.get_title().split(":")[0] for ax in axes] == ["hard", "medium", "easy"]
    oscr = res[(res["metric"] == "oscr") & res["error"].isna() & res["value"].notna()]
    summary = oscr.groupby("detector")["value"].mean()
    union: dict[str, str] = {}
    for ax in axes:  # broken fails on hard: drawn on easy and medium only
        coloured = _coloured(ax)
        assert len(set(coloured.values())) == len(coloured)
        for d, c in coloured.items():
            assert union.setdefault(d, c) == c  # one colour per detector across panels
    _assert_highlight(union, summary)


def test_few_detectors_are_all_coloured(run_dir: Path) -> None:
    fig = F.level_curves_figure(load_run(run_dir).results)
    assert fig is not None
    for ax in [a for a in fig.axes if a.lines]:
        colours = [to_hex(ln.get_color()) for ln in ax.lines]
        assert GREY not in colours and len(set(colours)) == len(colours)


def test_pick_highlights_respects_the_metric_direction() -> None:
    summary = {"a": 0.1, "msp": 0.5, "b": 0.9, "c": float("nan"), "d": 0.3, "e": 0.7}
    assert pick_highlights(summary, "max", n_best=1, n_worst=1) == {
        "msp": "reference",
        "b": "best",
        "a": "worst",
    }
    assert pick_highlights(summary, "min", n_best=2, n_worst=1) == {
        "msp": "reference",
        "a": "best",
        "d": "best",
        "b": "worst",
    }
    assert pick_highlights({"x": 1.0}, "max") == {"x": "best"}
    with pytest.raises(ValueError, match="direction"):
        pick_highlights(summary, "up")


def test_every_shift_axis_runs_from_smaller_to_larger_shift(many: RunData) -> None:
    assert shift_order(["easy", "medium", "hard"]) == ["hard", "medium", "easy"]
    assert shift_order(["3", "10", "1"]) == ["1", "3", "10"]
    fig = F.level_curves_figure(many.results)
    assert fig is not None
    graded_ax, osr_ax = [ax for ax in fig.axes if ax.lines]
    assert [t.get_text() for t in graded_ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert [t.get_text() for t in osr_ax.get_xticklabels()] == ["hard", "medium", "easy"]
    for ax in (graded_ax, osr_ax):
        left, right = ax.get_xlim()
        assert left < right  # not inverted: the first tick label is on the left
        assert "smaller" in ax.get_xlabel() or "hard = smallest" in ax.get_xlabel()
    (page, *_) = F.grid_heatmap_figures(many.results, "auroc")
    ax = next(a for a in page.axes if a.get_title() == "msp")
    for axis in (ax.xaxis, ax.yaxis):
        fmt = axis.get_major_formatter()
        assert [fmt(v, k) for k, v in enumerate(axis.get_majorticklocs())] == ["1", "2", "3", "4"]
        assert list(axis.get_majorticklocs()) == [0, 1, 2, 3]
    assert ax.get_xlim()[0] < ax.get_xlim()[1] and ax.get_ylim()[0] < ax.get_ylim()[1]


def test_heatmap_cells_carry_their_values(many: RunData) -> None:
    res = many.results
    (page, *_) = F.grid_heatmap_figures(res, "auroc")
    ax = next(a for a in page.axes if a.get_title() == "msp")
    cells = res[
        (res["protocol"] == "graded")
        & (res["metric"] == "auroc")
        & (res["detector"] == "msp")
        & res["covariate_level"].notna()
        & res["value"].notna()
    ]
    want = sorted(f"{100 * v:.0f}" for v in cells["value"])
    assert sorted(t.get_text() for t in ax.texts) == want
    assert len(want) == 15  # 16 cells, one N/A
    assert all(t.get_fontsize() >= 6 for t in ax.texts)
    assert all(t.get_fontsize() >= 7 for t in ax.get_xticklabels())


def test_decomposition_legend_clear_of_title_and_sorted(many: RunData) -> None:
    fig = F.decomposition_figure(many.results)
    assert fig is not None
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    title = fig.texts[0].get_window_extent(r)
    legend = fig.legends[0].get_window_extent(r)
    assert not _overlap(title, legend)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert set(labels) <= set(DETECTORS) and len(labels) >= 49
    first = next(ln for ln in ax.lines if ln.get_label() == "ID vs OOD")
    x = np.asarray(first.get_xdata(), dtype=float)
    assert np.all(np.diff(x[np.isfinite(x)]) <= 0)  # best first


def test_figures_are_deterministic(many: RunData) -> None:
    def png(fig: Figure | None) -> bytes:
        assert fig is not None
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=60, metadata={"Software": None})
        return buf.getvalue()

    assert png(F.level_curves_figure(many.results)) == png(F.level_curves_figure(many.results))
    assert png(F.oscr_figure(many)) == png(F.oscr_figure(many))


def test_the_sanity_figure_draws_an_interval_that_misses_its_value():
    """A percentile interval from few resamples need not contain the point value: no negative
    error bar (matplotlib refuses them), the bar runs from the value to each bound."""
    import pandas as pd

    from semshift.report.figures import sanity_figure

    rows = pd.DataFrame({
        "protocol": "sanity", "set": "ood", "split": ["seed0", "seed1"], "detector": "msp",
        "metric": "auroc", "value": [0.50, 0.62], "ci_low": [0.52, 0.55], "ci_high": [0.60, 0.61],
        "error": None, "semantic_level": None, "covariate_level": None,
    })  # fmt: skip
    fig = sanity_figure(rows)
    assert fig is not None
    fig.canvas.draw()
