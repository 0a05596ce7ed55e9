"""``semshift benchmark list``: one line per benchmark at 80 columns, ``--wide`` with every set
and list source, ``--json`` with everything."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from semshift.catalog.benchmarks import get_benchmark, list_benchmarks
from semshift.cli import app


def test_the_default_view_is_one_line_per_benchmark_at_80_columns():
    out = CliRunner().invoke(app, ["benchmark", "list"], env={"COLUMNS": "80"}).output
    lines = out.rstrip("\n").split("\n")
    names = list_benchmarks()
    assert all(len(line) <= 80 for line in lines)
    # title, 3 header lines, one line per benchmark, the bottom border
    assert len(lines) == 1 + 3 + len(names) + 1
    for name in names:  # every name whole, on a line of its own
        assert sum(f"│ {name} " in line for line in lines) == 1
    assert "imagenet1k,imagenet21k +4" in out and "3+4" in out  # imagenet-ood's optional parts


def test_wide_lists_every_set_and_json_everything():
    wide = CliRunner().invoke(app, ["benchmark", "list", "--wide"], env={"COLUMNS": "300"})
    assert wide.exit_code == 0
    for s in get_benchmark("isood-imagenet").sets():
        assert s.name in wide.output
    got = CliRunner().invoke(app, ["benchmark", "list", "--json"])
    data = json.loads(got.output)
    assert [d["name"] for d in data] == list_benchmarks()
    ood = next(d for d in data if d["name"] == "imagenet-ood")
    assert ood["list_hash"] == get_benchmark("imagenet-ood").list_hash
    assert {s["name"] for s in ood["sets"]} >= {"id_test", "imagenet-ood", "openimage-o"}
