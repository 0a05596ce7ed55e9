"""Damaged stores: detected by ``semshift store verify``, repaired by recomputing only the damage.

Each kind of damage (issue 20, defect 5) is made on a fresh copy of one extracted store:
a flipped byte in a shard's arrays or in its index, in the store's index or head, a deleted
commit record, a deleted shard file. ``store verify`` exits 2 naming the shard or file;
``store repair`` removes what is damaged; the same extraction then recomputes only the removed
shards and gives back the original arrays bit for bit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semshift.features.store import open_store, repair_store, verify_store  # noqa: E402

N_SHARDS = 3


def _flip(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if offset is None else offset
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _extract(images: Path, out: Path) -> object:
    from semshift.demo.model import GlyphNet, GlyphNetAdapter
    from semshift.features.data import image_folder
    from semshift.features.extract import extract

    torch.manual_seed(0)
    model = GlyphNetAdapter(GlyphNet(2, widths=(4, 4, 8, 8)))
    return extract(model, image_folder(images), out, preset="resize32-crop32", batch_size=4,
                   shard_size=4, device="cpu", progress=False, fsync=False)  # fmt: skip


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from PIL import Image

    root = tmp_path_factory.mktemp("damage")
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / "imgs" / c).mkdir(parents=True)
        for i in range(6):
            arr = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            Image.fromarray(arr).save(root / "imgs" / c / f"{i}.png")
    _extract(root / "imgs", root / "store")
    assert len(open_store(root / "store").meta["shards"]) == N_SHARDS
    return {"images": root / "imgs", "store": root / "store"}


DAMAGES = {
    "shard logits flipped": (lambda s: _flip(s / "shards" / "00001.logits.npy"), [1]),
    "shard features flipped": (lambda s: _flip(s / "shards" / "00002.features.npy"), [2]),
    "shard index flipped": (lambda s: _flip(s / "shards" / "00000.index.parquet"), [0]),
    "shard file deleted": (lambda s: (s / "shards" / "00001.logits.npy").unlink(), [1]),
    "commit record deleted": (lambda s: (s / "shards" / "00002.json").unlink(), [2]),
    "store index flipped": (lambda s: _flip(s / "index.parquet"), []),
    "head flipped": (lambda s: _flip(s / "head.npz"), []),
}


@pytest.mark.parametrize("case", list(DAMAGES))
def test_verify_names_the_damage_and_repair_recomputes_only_it(
    original, tmp_path, cli, case
) -> None:
    store = tmp_path / "store"
    shutil.copytree(original["store"], store)
    damage, shards = DAMAGES[case]
    damage(store)

    found = verify_store(store)
    assert found and sorted({d.shard for d in found if d.shard is not None}) == shards
    res = cli(["store", "verify", str(store)])
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: store {store} is damaged: ")
    for d in found:
        assert str(d) in lines[0]
    assert f"semshift store repair {store}" in lines[0]

    res = cli(["store", "repair", str(store)])
    assert res.returncode == 0, res.stderr
    assert f"{N_SHARDS - len(shards)} intact shard(s) kept" in " ".join(res.stdout.split())
    summary = _extract(original["images"], store)
    assert summary.n_resumed == N_SHARDS - len(shards)  # type: ignore[attr-defined]
    assert verify_store(store) == []
    got, want = open_store(store), open_store(original["store"])
    for name in ("logits", "features"):
        np.testing.assert_array_equal(got.arrays(name)[0], want.arrays(name)[0])
    assert got.index.equals(want.index)


def test_an_intact_store_verifies_and_needs_no_repair(original, cli) -> None:
    res = cli(["store", "verify", str(original["store"])])
    assert res.returncode == 0 and "intact (3 shards, 12 rows" in " ".join(res.stdout.split())
    assert repair_store(original["store"]).damages == []
    assert (original["store"] / "meta.json").is_file()


def test_a_damaged_store_is_refused_before_use_by_a_run(original, tmp_path) -> None:
    """The run's verification names the shard and points to the repair command."""
    from semshift.errors import InputError
    from semshift.run.cache import StageCache
    from semshift.run.verify import VerifiedStores

    store = tmp_path / "store"
    shutil.copytree(original["store"], store)
    (store / "shards" / "00000.json").unlink()
    with pytest.raises(InputError, match=r"^data\.id_test: feature store .* is damaged: shard 0 "
                       r"\(shards/00000\.json: commit record missing\); run `semshift store "
                       r"repair "):  # fmt: skip
        VerifiedStores(StageCache(tmp_path / "cache")).open(store, "data.id_test")
