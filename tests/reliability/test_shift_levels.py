"""One convention for shift levels everywhere: a higher level means a larger shift.

Every shipped benchmark, every example config and the demo number their sets this way: SSB's
Hard bin (unknown classes nearest the known ones) is the lowest semantic level and Easy the
highest; IS-OOD's ``sem_j`` / ``cov_i`` cells are levels j and i (0 = the smallest shift, as the
paper's Algorithm 1 bins rising distances); a corruption's severity is its covariate level. The
graded protocol's correlation and sensitivity have the sign they have in IS-OOD only then.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from semshift.catalog import isood_cells
from semshift.catalog.benchmarks import get_benchmark, list_benchmarks
from semshift.errors import InputError
from semshift.splits import ssb_bin_level
from semshift.taxonomy import load_classlist, wordnet

ROOT = Path(__file__).resolve().parents[2]
BY_SHIFT = ("hard", "medium", "easy")  # SSB bins, smallest semantic shift first


def _option_sets(name: str) -> list[dict[str, object]]:
    """Every combination of a benchmark's boolean options (the others at their defaults)."""
    opts = get_benchmark(name).options
    flags = [k for k, v in opts.items() if isinstance(v, bool)]
    combos: list[dict[str, object]] = [{}]
    for f in flags:
        combos = [{**c, f: v} for c in combos for v in (False, True)]
    return combos


def _check_bins(levels: dict[str, object], where: str) -> None:
    """SSB bins present in ``levels`` rise Hard < Medium < Easy, numbered 1, 2, ..."""
    bins = [b for b in BY_SHIFT if b in levels]
    assert [levels[b] for b in bins] == list(range(1, len(bins) + 1)), (where, levels)


def test_ssb_bin_level_orders_bins_by_shift():
    assert [ssb_bin_level(b) for b in BY_SHIFT] == [1, 2, 3]
    assert [ssb_bin_level(b, ("easy", "hard")) for b in ("hard", "easy")] == [1, 2]
    assert ssb_bin_level("MEDIUM", ("medium", "easy")) == 1
    with pytest.raises(InputError, match="bin 'medium' is not one of"):
        ssb_bin_level("medium", ("easy", "hard"))
    with pytest.raises(InputError, match="unknown bins"):
        ssb_bin_level("easy", ("easy", "trivial"))


@pytest.mark.parametrize("name", list_benchmarks())
def test_every_benchmark_numbers_its_levels_by_shift(name):
    checked = 0
    for options in _option_sets(name):
        sets = get_benchmark(name).sets(**options)
        bins = {s.split: s.semantic_level for s in sets if s.split in BY_SHIFT}
        if bins:
            _check_bins(bins, f"{name} {options}")
            checked += len(bins)
        for s in sets:
            if s.name.startswith("cov_"):  # IS-OOD cells cov_i_sem_j
                _, cov, _, sem = s.name.split("_")
                assert (s.semantic_level, s.covariate_level) == (int(sem), int(cov)), s.name
                checked += 1
            if s.corruption is not None and s.covariate_level is not None:
                assert s.covariate_level == s.corruption["severity"], s.name
                checked += 1
            if s.name.startswith("imagenet-c-"):
                assert s.covariate_level == int(s.name.rsplit("-", 1)[1]), s.name
                checked += 1
    if name != "imagenet-ood":  # a single semantic set; its covariate sets are unlevelled
        assert checked > 0, f"{name}: no levelled set was checked"


def test_imagenet_ood_by_severity_levels_rise_with_severity():
    sets = get_benchmark("imagenet-ood").sets(c_by_severity=True)
    sev = {s.name: s.covariate_level for s in sets if s.name.startswith("imagenet-c-")}
    assert sev == {f"imagenet-c-{k}": k for k in range(1, 6)}


def test_isood_semantic_levels_rise_with_wordnet_distance():
    """The shipped IS-OOD lists themselves: a higher ``sem`` index holds classes farther (in
    WordNet path length) from the nearest ImageNet-1K class, as a larger semantic shift should."""
    wn = wordnet()
    in1k = list(load_classlist("imagenet1k").ids)
    by_level: dict[int, set[str]] = {}
    for cell, files in isood_cells().items():
        sem = int(cell.split("_")[3])
        by_level.setdefault(sem, set()).update(f.split("/")[2] for f in files)
    wnids = sorted(w for w in set().union(*by_level.values()) if w in wn)
    nearest = dict(zip(wnids, wn.distance_matrix(wnids, in1k).min(axis=1), strict=True))
    levels = sorted(by_level)
    means = np.array([np.mean([nearest[w] for w in by_level[k] if w in nearest]) for k in levels])
    assert levels == list(range(8))
    assert np.corrcoef(levels, means)[0, 1] > 0.8, means
    assert means[0] < means[1] < means[2] < means[3] and means[0] < means[-1] - 0.5, means


def _config_files() -> list[Path]:
    """The example run configs (training configs have no ``data.sets``)."""
    out = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if isinstance(cfg.get("data"), dict) and cfg["data"].get("sets"):
            out.append(path)
    return out


def test_the_example_run_configs_are_found():
    names = {p.name for p in _config_files()}
    assert {"demo.yaml", "imagenet_ssb.yaml", "isood_graded.yaml"} <= names, names


@pytest.mark.parametrize("path", _config_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_config_numbers_its_levels_by_shift(path):
    cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    sets = cfg["data"]["sets"]
    bins = {
        str(s["split"]).lower(): s["semantic_level"]
        for s in sets.values()
        if isinstance(s, dict) and str(s.get("split", "")).lower() in BY_SHIFT
        and "semantic_level" in s
    }  # fmt: skip
    _check_bins(bins, str(path))
    for name, s in sets.items():
        if isinstance(s, dict) and s.get("corruption") and "covariate_level" in s:
            assert s["covariate_level"] == s["corruption"]["severity"], (path, name)
        if isinstance(s, dict) and "grid" in s:  # levels from a table: semantic/covariate names
            assert set(s["grid"]) >= {"semantic"}, (path, name)


def test_demo_config_numbers_bins_and_severities_by_shift(tmp_path):
    from semshift.demo import BINS

    _check_bins(dict(BINS), "semshift.demo.BINS")
    demo = yaml.safe_load((ROOT / "examples" / "configs" / "demo.yaml").read_text("utf-8"))
    sets = demo["data"]["sets"]
    for name, s in sets.items():
        if s.get("split") in BY_SHIFT:
            assert s["semantic_level"] == BINS[s["split"]], name
        if s.get("corruption"):
            base = name.split("_")[0]
            if s["role"] == "ood":  # a bin with a corruption: both levels
                assert s["semantic_level"] == BINS[base], name
            assert s["covariate_level"] == s["corruption"]["severity"], name
