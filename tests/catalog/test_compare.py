"""compare_manifests on hand-made splits, and ``semshift splits compare`` end to end."""

from __future__ import annotations

import math

import pytest

from semshift.errors import InputError
from semshift.splits.manifest import SplitManifest, compare_manifests


def _m(known: list[str], **bins: list[str]) -> SplitManifest:
    return SplitManifest("hand", {}, "none", known, bins)


def test_compare_counts_and_jaccard():
    a = _m(["a", "b", "c"], easy=["d", "e"], hard=["f", "g", "h", "i"])
    b = _m(["a", "b", "x", "y"], easy=["e", "d", "d"], medium=["f"])
    t = compare_manifests(a, b)
    assert list(t.columns) == ["bin", "n_a", "n_b", "n_common", "jaccard"]
    assert t.bin.tolist() == ["known", "easy", "hard", "medium"]
    assert t.n_a.tolist() == [3, 2, 4, 0]
    assert t.n_b.tolist() == [4, 2, 0, 1]  # distinct ids: the repeated "d" counts once
    assert t.n_common.tolist() == [2, 2, 0, 0]
    assert t.jaccard.tolist() == pytest.approx([2 / 5, 1.0, 0.0, 0.0])


def test_compare_is_symmetric_and_empty_sets_give_nan():
    a = _m(["a"], easy=[], hard=["b", "c"])
    b = _m(["a", "z"], easy=[], hard=["c"])
    ab, ba = compare_manifests(a, b), compare_manifests(b, a)
    assert ab.n_a.tolist() == ba.n_b.tolist() and ab.n_common.tolist() == ba.n_common.tolist()
    assert ab.jaccard.iloc[[0, 2]].tolist() == ba.jaccard.iloc[[0, 2]].tolist() == [0.5, 0.5]
    assert math.isnan(ab.jaccard.iloc[1])


def test_compare_refuses_a_bin_named_known():
    with pytest.raises(InputError, match="named 'known'"):
        compare_manifests(SplitManifest("x", {}, "none", ["a"], {"known": ["b"]}), _m(["a"]))


def test_cli_compares_the_two_published_imagenet_splits(semshift):
    res = semshift("splits", "compare", "published:ssb-imagenet", "published:ssb-imagenet-fall11")
    assert res.returncode == 0, res.stderr
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:6]]
        for line in res.stdout.splitlines()
        if line.startswith("│")
    }
    assert rows == {
        "known": ["1000", "991", "991", "0.991"],
        "easy": ["1000", "1000", "1000", "1.000"],
        "hard": ["980", "1000", "980", "0.980"],
    }
    assert "published:ssb-imagenet (lists 59aa5a7f0d817f1a)" in res.stdout


def test_cli_compares_a_split_file_with_a_published_split(semshift, tmp_path):
    from semshift.catalog import published_split

    path = published_split("ssb-cub").write(tmp_path / "cub")
    res = semshift("splits", "compare", str(path), "published:ssb-cub")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("1.000") == 4  # known, easy, medium, hard


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("published:ssb-imagnet", "published:ssb-cub"), "unknown published list 'ssb-imagnet'"),
        (("missing/split.json", "published:ssb-cub"), "cannot read split manifest missing"),
    ],
)
def test_cli_bad_names_and_files_exit_2_with_one_line(semshift, args, message):
    res = semshift("splits", "compare", *args)
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {message}") and res.stderr.count("\n") == 1
    assert res.stdout == ""
