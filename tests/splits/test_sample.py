"""The ``sample`` split builder (the SSB's more-classes ablation): nested, seeded random samples
of open-set classes, from Python, a run config and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from semshift.errors import InputError
from semshift.splits import list_builders
from semshift.splits.registry import BuildContext, build_split, validate_params
from semshift.splits.sample import build_sample_split

TAX = "id,parent,name\nroot,,root\n" + "".join(f"c{i:02d},root,class {i}\n" for i in range(30))


@pytest.fixture
def tax(tmp_path: Path) -> Path:
    path = tmp_path / "flat.csv"
    path.write_text(TAX)
    return path


def test_samples_are_nested_seeded_and_exclude_the_known(tax):
    known = ["c00", "c01", "c02"]
    pool = [f"c{i:02d}" for i in range(30)]
    m = build_sample_split(known, pool, sizes=(10, 5, 20), seed=3, taxonomy=tax)
    assert list(m.bins) == ["random_5", "random_10", "random_20"]
    big = m.bins["random_20"]
    assert m.bins["random_5"] == big[:5] and m.bins["random_10"] == big[:10]
    assert len(set(big)) == 20 and not set(big) & set(known)
    again = build_sample_split(known, pool, sizes=(5, 10, 20), seed=3, taxonomy=tax)
    assert again.bins == m.bins  # the same draw whatever the order of sizes
    other = build_sample_split(known, pool, sizes=(20,), seed=4, taxonomy=tax)
    assert other.bins["random_20"] != big
    assert m.extra["counts"] == {"candidates": 27, "known": 3}
    assert m.params["sizes"] == [5, 10, 20] and m.method == "sample"


def test_too_large_a_sample_is_one_line(tax):
    with pytest.raises(InputError, match=r"a sample of 28 classes, but the pool .* has 27"):
        build_sample_split(["c00", "c01", "c02"], [f"c{i:02d}" for i in range(30)], sizes=(28,),
                           taxonomy=tax)  # fmt: skip


def test_the_builder_validates_and_builds_from_a_config(tax):
    assert "sample" in list_builders()
    with pytest.raises(InputError, match=r"x\.params\.sizes: .*given twice"):
        validate_params("sample", {"sizes": [5, 5]}, where="x")
    with pytest.raises(InputError, match=r"x\.params\.sizes: "):
        validate_params("sample", {"sizes": [0]}, where="x")
    ctx = BuildContext(taxonomy=tax.name, base_dir=tax.parent, where="run.yaml: splits.more")
    m = build_split("sample", {"known": ["c00"], "sizes": [4, 8], "seed": 1}, ctx)
    assert len(m.bins["random_8"]) == 8 and m.bins["random_4"] == m.bins["random_8"][:4]
    # pool None under a custom taxonomy: every leaf outside the known set
    assert m.extra["counts"]["candidates"] == 29


def test_the_cli_writes_the_manifest(tax, tmp_path):
    exe = str(Path(sys.executable).parent / "semshift")
    known = tmp_path / "known.txt"
    known.write_text("c00\nc01\n")
    res = subprocess.run(
        [exe, "splits", "sample", "--taxonomy", str(tax), "--known", str(known),
         "--sizes", "3,6", "--seed", "2", "--out", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "28 candidate classes outside the 2 known, seed 2: random_3 3, random_6 6" in res.stdout
    saved = json.loads((tmp_path / "s" / "split.json").read_text())
    assert saved["bins"]["random_3"] == saved["bins"]["random_6"][:3]
    bad = subprocess.run([exe, "splits", "sample", "--sizes", "ten", "--out", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "--sizes: expected class counts" in bad.stderr


def test_docstring_example():
    import doctest

    import semshift.splits.sample as module

    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
