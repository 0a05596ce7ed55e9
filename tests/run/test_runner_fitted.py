"""A run with model-level detectors that learn from the ID training images (gram, nac).

The run fits them once on the id_train images with the configured model (cached under
``.cache/model_fit/``), scores every evaluated set during its extraction, reuses the fit on a
second run, and leaves them out with a note when id_train is a feature store (no images to
fit on).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from semshift import detectors as D  # noqa: E402
from semshift.run import run  # noqa: E402

FITTED = [n for n in D.list_detectors(level="model") if D.get_class(n).fits]


def _images(root: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    sets = {"train": ("r", "g", "b"), "test": ("r", "g", "b"), "ood": ("k",)}
    for split, classes in sets.items():
        for k, c in enumerate(classes):
            (root / split / c).mkdir(parents=True)
            for i in range(6):
                base = np.zeros((32, 32, 3), np.int64)
                if c != "k":
                    base[..., k] = 180
                else:
                    base += 90
                arr = np.clip(base + rng.integers(0, 60, (32, 32, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(arr).save(root / split / c / f"{i}.png")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from semshift.demo.model import GlyphNet

    root = tmp_path_factory.mktemp("fitted_run")
    _images(root)
    (root / "classes.txt").write_text("r\ng\nb\n")
    torch.manual_seed(0)
    torch.save(GlyphNet(3, widths=(4, 4, 8, 8)).state_dict(), root / "glyph.pt")
    return root


def _config(root: Path, out: Path, id_train: dict) -> dict:
    return {
        "output": str(out),
        "classes": str(root / "classes.txt"),
        "model": {"name": "demo-glyphnet", "weights": str(root / "glyph.pt"), "num_classes": 3,
                  "kwargs": {"widths": [4, 4, 8, 8]}, "preset": "resize32-crop32",
                  "batch_size": 8, "shard_size": 16, "workers": 0},
        "data": {
            "id_train": id_train,
            "id_test": {"images": str(root / "test")},
            "sets": {"ood": {"role": "ood", "split": "ood", "images": str(root / "ood")}},
        },
        "detectors": ["msp", *FITTED],
        "protocols": {"osr": {}},
        "bootstrap": {"n_resamples": 0},
    }  # fmt: skip


def test_fitted_detectors_are_fitted_on_id_train_and_scored(data, tmp_path) -> None:
    assert {"gram", "nac"} <= set(FITTED)
    out = tmp_path / "out"
    run(_config(data, out, {"images": str(data / "train")}), progress=False)
    frame = pd.read_parquet(out / "scores" / "ood.parquet")
    for name in FITTED:
        assert np.isfinite(frame[f"score:{name}"]).all(), name
    results = pd.read_parquet(out / "results.parquet")
    assert set(FITTED) <= set(results["detector"].dropna())
    fits = sorted((out / ".cache" / "model_fit").glob("*/state.npz"))
    assert len(fits) == len(FITTED)
    stamps = [f.stat().st_mtime_ns for f in fits]
    # the extracted stores record which fit scored them
    metas = [json.loads(p.read_text()) for p in (out / ".cache" / "extract").glob("*/meta.json")]
    recorded = [m["scores"][n]["fit"] for m in metas for n in FITTED if n in m.get("scores", {})]
    assert recorded and all(r["source"] and len(r["state"]) == 16 for r in recorded)

    # a second run reuses every fit and store: the same scores
    run(_config(data, out, {"images": str(data / "train")}), progress=False)
    assert [f.stat().st_mtime_ns for f in fits] == stamps
    again = pd.read_parquet(out / "scores" / "ood.parquet")
    pd.testing.assert_frame_equal(frame, again)


def test_without_training_images_they_are_left_out_with_a_note(data, tmp_path) -> None:
    first = tmp_path / "first"
    run(_config(data, first, {"images": str(data / "train")}), progress=False)
    train_store = next(
        p.parent for p in (first / ".cache" / "extract").glob("*/meta.json")
        if json.loads(p.read_text())["dataset"]["root"].endswith("train")
    )  # fmt: skip
    out = tmp_path / "out"
    run(_config(data, out, {"store": str(train_store)}), progress=False)
    notes = json.loads((out / "results.json").read_text())["notes"]
    for name in FITTED:
        assert "data.id_train is a feature store" in notes["skipped_model_level"][name]
