"""A toy protocol added by one module (tests/extensions/toy_protocol.py) reaches every place a
protocol appears: the protocol list, run-config validation, the evaluate stage's results and
the HTML / Markdown report, with no edit to semshift."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from semshift.errors import InputError, UnknownNameError
from semshift.protocols import get_protocol, list_protocols
from semshift.protocols.registry import PROTOCOLS, report_rows
from semshift.run import load_config, run
from tests.extensions import toy_protocol as toy
from tests.extensions.conftest import registration
from tests.run.conftest import base_config, build_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_stores(tmp_path_factory.mktemp("toy_protocol"))


@pytest.fixture
def registered() -> Iterator[None]:
    with registration(toy):
        yield


def test_the_toy_is_listed_and_unlisted_after(registered: None) -> None:
    assert toy.NAME in PROTOCOLS and list_protocols()[-1] == toy.NAME
    assert get_protocol(toy.NAME).rows == (toy.NAME,) and toy.NAME in report_rows()
    with pytest.raises(InputError, match="already registered"):
        toy.register()


def test_after_cleanup_the_toy_is_unknown() -> None:
    assert toy.NAME not in PROTOCOLS
    with pytest.raises(UnknownNameError, match="unknown protocol 'toy_gap'"):
        get_protocol(toy.NAME)


def test_the_toy_validates_in_a_run_config(registered: None, stores, tmp_path) -> None:
    cfg = load_config(base_config(stores, tmp_path / "out", protocols={toy.NAME: {"scale": 2}}))
    assert cfg.protocols.enabled() == [toy.NAME]
    pc = cfg.protocols.get(toy.NAME)
    assert isinstance(pc, toy.ToyGapConfig) and pc.scale == 2
    bad = base_config(stores, tmp_path / "out", protocols={toy.NAME: {"scael": 2}})
    with pytest.raises(InputError, match=r"protocols\.toy_gap\.scael: unknown key \(did you "
                                         r"mean 'scale'\?\); known keys: scale"):  # fmt: skip
        load_config(bad)
    with pytest.raises(InputError, match=r"protocols\.toy_gap\.scale: "):
        load_config(base_config(stores, tmp_path / "out", protocols={toy.NAME: {"scale": 0}}))


def test_without_the_toy_its_key_is_unknown(stores, tmp_path) -> None:
    bad = base_config(stores, tmp_path / "out", protocols={toy.NAME: {}})
    with pytest.raises(InputError, match=r"protocols\.toy_gap: unknown key"):
        load_config(bad)


def test_the_toy_runs_and_its_section_is_in_the_report(registered: None, stores, tmp_path):
    out = tmp_path / "out"
    cfg = base_config(stores, out, protocols={"osr": {}, toy.NAME: {"scale": 2}},
                      detectors=["msp", "energy"], report={})  # fmt: skip
    result = run(cfg, progress=False)
    assert not result.errors
    table = pd.read_parquet(out / "results.parquet")
    rows = table[table["protocol"] == toy.NAME]
    assert set(rows["set"]) == {"easy", "hard", "cov"}
    assert set(rows["detector"]) == {"msp", "energy"} and set(rows["metric"]) == {"mean_gap"}
    scores = pd.read_parquet(out / "scores" / "id_test.parquet")
    easy = pd.read_parquet(out / "scores" / "easy.parquet")
    want = 2 * (scores["score:msp"].mean() - easy["score:msp"].mean())
    got = rows.query("detector == 'msp' and set == 'easy'")["value"].item()
    assert got == pytest.approx(want)
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (html, md):
        assert "Toy: mean score gap" in text and "Open-set recognition" in text
        assert "Mean ID test score minus mean score of the set, per detector." in text
        assert f"protocols: osr, {toy.NAME}." in text
    assert 'id="table-toy_gap"' in html and f"{got:.4g}" in html
    assert html.index("Open-set recognition") < html.index("Toy: mean score gap")
    assert "| Detector | easy | hard | cov |" in md


def test_semshift_evaluate_runs_the_toy_and_prints_its_table(registered: None, stores, tmp_path):
    from typer.testing import CliRunner

    from semshift.cli import app

    out = tmp_path / "ev"
    args = [
        "evaluate", "--train", str(stores["train"]), "--test", str(stores["test"]),
        "--ood", f"easy={stores['ood']}", "--select", "easy:split=easy",
        "-d", "msp", "--bootstrap", "0", "--protocol", toy.NAME, "--out", str(out),
    ]  # fmt: skip
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "Toy: mean score gap" in done.output  # the headline table: its declared section
    table = pd.read_parquet(out / "results.parquet")
    assert set(table["protocol"]) == {toy.NAME} and set(table["set"]) == {"easy"}
    assert "Toy: mean score gap" in (out / "report.html").read_text(encoding="utf-8")


def test_an_installed_plugin_registers_the_toy_through_its_entry_point(monkeypatch, tmp_path):
    """A distribution on sys.path whose ``semshift.protocols`` entry point names the module."""
    import sys

    info = tmp_path / "toy_protocol_plugin-0.1.dist-info"
    info.mkdir()
    meta = "Metadata-Version: 2.1\nName: toy-protocol-plugin\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    entry = f"[semshift.protocols]\n{toy.NAME} = tests.extensions.toy_protocol_plugin\n"
    (info / "entry_points.txt").write_text(entry)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tests.extensions.toy_protocol_plugin", raising=False)
    try:
        PROTOCOLS.refresh()
        assert toy.NAME in list_protocols() and get_protocol(toy.NAME).config is toy.ToyGapConfig
    finally:
        PROTOCOLS.remove(toy.NAME)
        sys.modules.pop("tests.extensions.toy_protocol_plugin", None)
