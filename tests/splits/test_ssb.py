"""SSB split builder: the faithful ImageNet preset, alternatives, hierarchy rules, bad input."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from semshift.errors import InputError, UnknownNameError
from semshift.splits import SplitManifest, build_ssb_split
from semshift.taxonomy import load_classlist


@pytest.fixture(scope="module")
def ssb_imagenet():
    return build_ssb_split("imagenet1k", "imagenet21k-p", preset="ssb")


def test_ssb_imagenet_bins_and_counts(ssb_imagenet):
    m = ssb_imagenet.manifest
    counts = m.extra["counts"]
    assert counts["known_given"] == 1000 and counts["known_used"] == 991
    assert counts["pool_given"] == 11_221 and counts["overlap_removed"] == 991
    assert counts["candidates"] == 10_230
    assert list(m.bins) == ["easy", "medium", "hard"]
    assert [len(v) for v in m.bins.values()] == [1000, 1000, 1000]
    all_binned = [c for ids in m.bins.values() for c in ids]
    assert len(set(all_binned)) == 3000
    assert not set(all_binned) & set(m.known)
    assert len(m.extra["dropped"]["known_not_in_pool_list"]) == 9
    audit = ssb_imagenet.audit
    assert len(audit) == 10_230
    assert audit["rank"].tolist() == list(range(1, 10_231))
    assert audit["score"].is_monotonic_increasing  # Easy = the smallest totals
    assert audit.loc[audit.bin == "easy", "rank"].max() == 1000
    assert audit.loc[audit.bin == "hard", "rank"].min() == 9231
    # the documented side effect: Easy collects shallow generic nodes, Hard deep ones
    s = ssb_imagenet.summary.set_index("bin")
    assert s.loc["easy", "mean_depth"] + 4 < s.loc["hard", "mean_depth"]
    assert m.bins["easy"][0] == "n00021939"  # artifact.n.01: the smallest total
    assert (audit["nearest_distance"] >= 1).all()


def _reference_tree(wn):
    """FIFO BFS from entity.n.01 over hyponym pointers (plain Python)."""
    ptr, idx = wn._child_ptr, wn._child_idx
    ids = wn.ids
    row = {str(x): i for i, x in enumerate(ids)}
    parent: dict[str, str | None] = {"n00001740": None}
    queue = deque(["n00001740"])
    while queue:
        u = queue.popleft()
        i = row[u]
        for c in ids[idx[ptr[i] : ptr[i + 1]]]:
            if c not in parent:
                parent[c] = u
                queue.append(c)
    return parent


def test_ssb_scores_equal_a_direct_chain_implementation(wn, ssb_imagenet):
    """total(u) = sum_k dist(k, u) computed with Python loops over chains
    (docs/methods.md#ssb-splits)."""
    parent = _reference_tree(wn)
    pool = set(load_classlist("imagenet21k-p").ids)

    def chain(u: str) -> list[str]:
        out = []
        while u is not None:
            if u in pool:
                out.append(u)
            u = parent[u]
        return out

    def dist(k: list[str], u: list[str]) -> int:
        for i, node in enumerate(u):
            if node in k:
                return i + k.index(node)
        return len(k) + len(u) + 1

    known = [chain(k) for k in ssb_imagenet.manifest.known]
    audit = ssb_imagenet.audit.set_index("wnid")
    rng = np.random.default_rng(0)
    sample = rng.choice(audit.index.to_numpy(), 12, replace=False).tolist()
    sample += [ssb_imagenet.manifest.bins["hard"][-1], ssb_imagenet.manifest.bins["easy"][0]]
    for u in sample:
        cu = chain(u)
        assert len(cu) <= 12
        assert audit.loc[u, "score"] == sum(dist(k, cu) for k in known)


def test_winter21_drops_without_refilling(ssb_imagenet):
    w = build_ssb_split(preset="ssb", restrict_to="imagenet21k-p-winter21")
    winter = set(load_classlist("imagenet21k-p-winter21").ids)
    for name, ids in w.manifest.bins.items():
        full = ssb_imagenet.manifest.bins[name]
        assert ids == [c for c in full if c in winter]
        assert w.manifest.extra["dropped"]["not_in_restrict_to"][name] == len(full) - len(ids)
    assert sum(w.manifest.extra["dropped"]["not_in_restrict_to"].values()) > 0


def test_nearest_and_lch_presets(wn):
    near = build_ssb_split(preset="nearest", bin_size=500)
    a = near.audit
    assert (a["score"] == a["nearest_distance"]).all()
    assert a["score"].is_monotonic_decreasing  # Easy = farthest from every known class
    assert set(a.loc[a.bin == "hard", "score"]) == {1.0}
    # spot-check the nearest distance against the taxonomy directly
    row = a.iloc[1234]
    known = load_classlist("imagenet1k").ids
    assert wn.distance_matrix([row.wnid], known).min() == row.score
    lch = build_ssb_split(preset="lch-mean", quantiles=(1 / 3, 2 / 3))
    sizes = [len(v) for v in lch.manifest.bins.values()]
    assert sum(sizes) == 10_230 and max(sizes) - min(sizes) <= 1
    assert lch.audit["score"].is_monotonic_increasing
    u = lch.audit.iloc[5000]
    assert u.score == pytest.approx(wn.similarity_matrix(known, [u.wnid], "lch").mean())


def test_aircraft_rules_on_a_toy_hierarchy(aircraft_csv):
    """docs/methods.md#ssb-splits: Hard = family has known variants; Medium = same
    manufacturer, other family; Easy = manufacturer with no known class."""
    r = build_ssb_split(
        ["737-300", "737-400", "a319"], None, taxonomy=aircraft_csv, preset="hierarchy"
    )
    bins = {k: sorted(v) for k, v in r.manifest.bins.items()}
    assert bins == {
        "easy": ["c172", "c172r"],
        "medium": ["747-100", "747-400", "a330-200", "a330-300"],
        "hard": ["737-500", "a320"],
    }
    assert list(r.manifest.bins) == ["easy", "medium", "hard"]
    assert r.manifest.taxonomy == "aircraft"
    gaps = r.audit.set_index("wnid")["score"]
    assert gaps["737-500"] == 1 and gaps["747-100"] == 2 and gaps["c172"] == 3


def test_cars_rules_with_four_levels(tmp_path):
    """Stanford Cars: Hard = same make/model/body, other year; Medium = same make/model, other
    body; Easy = the rest."""
    rows = [
        "id,parent",
        "audi,",
        "a4,audi",
        "a4-sedan,a4",
        "a4-wagon,a4",
        "a4-sedan-2010,a4-sedan",
        "a4-sedan-2012,a4-sedan",
        "a4-wagon-2012,a4-wagon",
        "a6,audi",
        "a6-sedan,a6",
        "a6-sedan-2011,a6-sedan",
        "bmw,",
        "x5,bmw",
        "x5-suv,x5",
        "x5-suv-2007,x5-suv",
    ]
    path = tmp_path / "cars.csv"
    path.write_text("\n".join(rows) + "\n")
    r = build_ssb_split(["a4-sedan-2010"], None, taxonomy=path, preset="hierarchy")
    assert r.manifest.bins["medium"] == ["a4-wagon-2012"]
    assert r.manifest.bins["hard"] == ["a4-sedan-2012"]
    assert sorted(r.manifest.bins["easy"]) == ["a6-sedan-2011", "x5-suv-2007"]


def test_overlap_removed_and_reported(tmp_path):
    pool = tmp_path / "pool.txt"
    pool.write_text("# a pool\nn02084071\nn02121620  cat\nn01440764\nn02374451\nn02691156\n")
    r = build_ssb_split("imagenet1k", pool, preset="nearest", bin_size=1)
    c = r.manifest.extra["counts"]
    assert c["overlap_removed"] == 1 and c["candidates"] == 4  # tench is an ImageNet-1K class
    assert "n01440764" not in r.audit["wnid"].tolist()


def test_bad_input_errors(tmp_path):
    with pytest.raises(InputError, match=r"exceed the 10230 candidates"):
        build_ssb_split(bin_size=4000)
    bad = tmp_path / "known.txt"
    bad.write_text("n02084071\nn0212162O\n")
    with pytest.raises(UnknownNameError, match=r"'n0212162O'.*known.txt, line 2.*did you mean"):
        build_ssb_split(bad, "imagenet21k-p")
    with pytest.raises(UnknownNameError, match="unknown preset 'ssbb'"):
        build_ssb_split(preset="ssbb")
    with pytest.raises(InputError, match="quantiles must be two increasing"):
        build_ssb_split(preset="nearest", quantiles=(0.7, 0.2))
    with pytest.raises(UnknownNameError, match="neither a shipped class list"):
        build_ssb_split("imagenet2k")
    dup = tmp_path / "dup.txt"
    dup.write_text("n02084071\nn02121620\nn02084071\n")
    with pytest.raises(InputError, match=r"dup.txt, line 3: duplicate class id"):
        build_ssb_split(dup)


def test_manifest_round_trip(tmp_path, ssb_imagenet):
    out = ssb_imagenet.write(tmp_path / "ssb")
    back = SplitManifest.read(out)
    assert back.to_dict() == ssb_imagenet.manifest.to_dict()
    assert back.bins == ssb_imagenet.manifest.bins
    import pandas as pd

    audit = pd.read_csv(out / "audit.csv")
    assert audit["wnid"].tolist() == ssb_imagenet.audit["wnid"].tolist()
    assert list(audit.columns) == [
        "wnid",
        "name",
        "bin",
        "rank",
        "score",
        "nearest_known",
        "nearest_known_name",
        "nearest_distance",
        "depth",
    ]


def test_manifest_validation(tmp_path):
    p = tmp_path / "split.json"
    p.write_text(
        '{"method": "x", "params": {}, "taxonomy": "t", "semshift_version": "0",'
        ' "known": ["a"], "bins": {"easy": "b"}}'
    )
    with pytest.raises(InputError, match=r"'bins.easy' must be a list"):
        SplitManifest.read(p)
    p.write_text('{"method": "x"}')
    with pytest.raises(InputError, match="missing key"):
        SplitManifest.read(tmp_path)
    p.write_text('{"method": "x",\n "params": }')
    with pytest.raises(InputError, match="line 2, column 12: invalid JSON"):
        SplitManifest.read(p)
