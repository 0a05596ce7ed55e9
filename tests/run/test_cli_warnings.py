"""``semshift run`` / ``evaluate`` print the failures the run went on after once, at the end,
grouped by detector and reason, with a pointer to the report: nothing live on stderr."""

from __future__ import annotations

import json

import pytest

from semshift import detectors as D
from semshift.cli import main

from .conftest import base_config


def test_failures_are_printed_once_grouped_after_the_table(stores, tmp_path, monkeypatch, capsys):
    def fit(self, **inputs):
        raise ValueError("knn.fit: the bank is empty")

    monkeypatch.setattr(D.get_class("knn"), "fit", fit)
    cfg = base_config(stores, tmp_path / "out", detectors=["msp", "knn"],
                      protocols={"osr": {}}, report={"formats": ["md"]})  # fmt: skip
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SystemExit) as exc:
        main(["run", str(path)])
    assert exc.value.code == 0
    out, err = capsys.readouterr()
    assert "knn" not in err  # nothing live
    head = "1 warning(s), grouped by detector and reason (details: the report's section Errors "
    assert out.count(head + "and N/A):\n") == 1
    warned = out.split(head, 1)[1]
    assert warned.count("the bank is empty") == 1  # once (the table's footnote explains its err)
    assert "- knn: fit failed in protocol osr (2 sets): the bank is empty." in warned
    assert out.index(head) > out.index("│ msp")  # after the headline table
