"""The report's hyperparameter-search table and sensitivity figure, read from search.csv."""

from __future__ import annotations

import numpy as np

from semshift.protocols.search import search_detector, search_frame, sensitivity_frame
from semshift.report import read_search_table, search_table
from semshift.report.figures import search_sensitivity_figures


def test_search_table_and_figure_from_the_written_csv(tmp_path):
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(3, 8)), np.zeros(3)
    h = rng.normal(size=(200, 8))
    res = search_detector(
        "vim",
        fit_inputs={"features": h, "logits": h @ w.T, "head": (w, b)},
        id_val={"features": h[:50], "logits": h[:50] @ w.T},
        val_ood={"features": 3 * h[50:100], "logits": 3 * h[50:100] @ w.T},
        space={"dim": [None, 2, 64]},
    )
    assert res.trials[2].error is not None  # dim = 64 >= D = 8: failed, never chosen
    path = tmp_path / "search.csv"
    search_frame([res]).to_csv(path, index=False)
    trials = read_search_table(path)
    assert trials is not None
    assert trials["candidate"].tolist() == ["None", "2", "64"]  # None is a candidate, not NA
    table = search_table(trials, defaults={"vim": res.trials[0].value}, val_ood="near")
    chosen = "None" if res.best == 0 else "2"
    assert table.rows == [f"vim: dim={chosen}"]
    assert table.values().iloc[0].tolist() == [res.value, res.trials[0].value, 3.0, 1.0]
    assert "'near'" in table.caption and "a tie goes to the first" in table.caption
    assert table.footnotes[0].startswith("vim: 1 of 3 combinations failed")
    sens_path = tmp_path / "search_sensitivity.csv"
    sensitivity_frame(search_frame([res])).to_csv(sens_path, index=False)
    sens = read_search_table(sens_path)
    assert sens is not None
    figures = search_sensitivity_figures(sens)
    assert len(figures) == 1
    panels = [ax for ax in figures[0].axes if ax.get_visible() and ax.axison]
    assert [ax.get_title() for ax in panels] == ["vim: dim"]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["None", "2", "64"]
    assert read_search_table(tmp_path / "absent.csv") is None
