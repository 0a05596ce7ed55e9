"""Progress bars only where someone watches (stderr a terminal, or forced), and the terminal's
headline table cut to one screen."""

from __future__ import annotations

import io
import sys

import pytest

from semshift.cli._options import TERMINAL_ROWS, compact_table
from semshift.progress import progress_wanted
from semshift.report.tables import Cell, Column, Table


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.mark.parametrize(
    ("tty", "env", "requested", "want"),
    [(True, None, True, True), (False, None, True, False), (True, None, False, False),
     (False, "1", True, True), (True, "0", True, False), (False, "1", False, False)],
)  # fmt: skip
def test_bars_show_on_a_terminal_unless_quiet_or_forced(monkeypatch, tty, env, requested, want):
    monkeypatch.setattr(sys, "stderr", _Stream(tty))
    if env is None:
        monkeypatch.delenv("SEMSHIFT_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("SEMSHIFT_PROGRESS", env)
    assert progress_wanted(requested) is want


def _table(n: int) -> Table:
    names = [f"d{k:02d}" for k in range(n - 2)] + ["msp", "mls"]
    cols = [Column("Acc"), Column("Easy", "AUROC"), Column("Hard", "AUROC")]
    # d00 is the best, d{n-3} the worst; msp and mls in the middle
    vals = [0.99 - 0.01 * k for k in range(n - 2)] + [0.9 - 0.001, 0.9 - 0.002]
    cells = [[Cell(0.95), Cell(v), Cell(v - 0.05)] for v in vals]
    return Table("osr", "OSR", "caption.", "Detector", cols, names, cells)


def test_a_long_headline_table_is_cut_to_the_best_the_baselines_and_the_worst():
    full = _table(40)
    short = compact_table(full)
    assert len(short.rows) == TERMINAL_ROWS
    assert {"msp", "mls", "d00", "d01", "d36", "d37"} <= set(short.rows)
    assert short.rows == [r for r in full.rows if r in short.rows]  # the table's order
    assert "26 of 40 detectors left out here" in short.caption
    kept = {r: c for r, c in zip(short.rows, short.cells, strict=True)}
    assert kept["d05"][1].value == pytest.approx(0.94)
    assert not any(r in short.rows for r in ("d20", "d30"))


def test_a_short_table_is_shown_whole():
    t = _table(10)
    assert compact_table(t) is t


def test_a_column_where_lower_is_better_ranks_the_other_way():
    t = _table(30)
    t.columns = [Column("Acc"), Column("FPR", direction="min"), Column("FPR2", direction="min")]
    short = compact_table(t)
    assert {"d27", "d26", "d25"} <= set(short.rows)  # lowest FPR = best
    assert {"d00", "d01"} <= set(short.rows)  # the highest FPR: the worst two
    assert "d10" not in short.rows
