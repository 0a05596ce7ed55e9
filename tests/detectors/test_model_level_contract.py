"""One contract, generated from the registry, run over every model-level detector.

A model-level detector is a registry entry that declares what it needs of the network
(``model_requires``) and computes its scores on a batch (``score_batch``); this file checks
every one of them on a tiny CNN that has everything a detector may need (gradients, a feature
map, dropout), on models that lack each need, through the extraction's executor and through a
run. A new model-level detector gets these checks without editing this file.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.detectors.model_level import MODEL_NEEDS, ModelView  # noqa: E402
from semshift.errors import InputError, NotFittedError  # noqa: E402
from semshift.features.models import ModelAdapter  # noqa: E402

NAMES = detectors.list_detectors(level="model")


class TinyNet(nn.Module):
    """conv 3->6, ReLU (the feature map), average pool (h), dropout, linear head."""

    def __init__(self, num_classes: int = 4, p: float = 0.3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.drop = nn.Dropout(p)
        self.fc = nn.Linear(6, num_classes)

    def forward(self, x: Any) -> Any:
        h = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(self.drop(h))


class TinyAdapter(ModelAdapter):
    """TinyNet as a model adapter; ``feature_map=False`` or ``dropout=False`` takes a need away."""

    mean = (0.5, 0.5, 0.5)
    std = (0.25, 0.25, 0.25)

    def __init__(
        self, *, feature_map: bool = True, dropout: bool = True, layers: bool = True, seed: int = 0
    ) -> None:
        torch.manual_seed(seed)
        self.name = "tiny"
        self.module = TinyNet(p=0.3 if dropout else 0.0).double().eval()
        self.layer = "mean(relu(conv))"
        self.has_feature_map = feature_map
        self.layers = layers

    def block_names(self) -> tuple[str, ...]:
        return ("conv", "drop") if self.layers else ()

    def feature_map(self, x: Any) -> Any:
        if not self.has_feature_map:
            return super().feature_map(x)
        return torch.relu(self._m.conv(x))

    def from_feature_map(self, fmap: Any) -> tuple[Any, Any]:
        h = fmap.mean(dim=(2, 3))
        return self._m.fc(self._m.drop(h)), h

    def features(self, x: Any) -> Any:
        return torch.relu(self._m.conv(x)).mean(dim=(2, 3))

    def forward(self, x: Any) -> tuple[Any, Any]:
        fmap = torch.relu(self._m.conv(x))
        h = fmap.mean(dim=(2, 3))
        return self._m.fc(self._m.drop(h)), h

    __call__ = forward

    def _head_module(self) -> nn.Linear:
        return self._m.fc


def _images(n: int = 6, seed: int = 0, dtype: Any = None) -> Any:
    x = torch.from_numpy(np.random.default_rng(seed).normal(size=(n, 3, 8, 8)))
    return x if dtype is None else x.to(dtype)


def _train_batches(model: Any, n: int = 40, seed: int = 5) -> Any:
    """Labelled ID training batches for the detectors that fit (labels cycle over 4 classes)."""
    p = next(model.module.parameters())
    x = _images(n, seed).to(p.dtype)
    y = torch.arange(n) % 4

    def batches() -> Any:
        for lo in range(0, n, 16):
            yield x[lo : lo + 16], y[lo : lo + 16]

    return batches


def _ready(det: Any, model: Any) -> Any:
    """``det``, fitted on the training batches when it learns from ID images."""
    return det.fit_model(model, _train_batches(model), source="train") if det.fits else det


@pytest.mark.parametrize("name", NAMES)
def test_declaration(name: str) -> None:
    cls = detectors.get_class(name)
    assert issubclass(cls, detectors.ModelLevelDetector) and cls.level == "model"
    assert cls.model_requires <= MODEL_NEEDS.keys()
    assert cls.needs_grad == ("grad" in cls.model_requires)
    assert cls.needs_feature_map == ("feature_map" in cls.model_requires)
    det = detectors.get(name)
    assert det.describe() == {"name": name, **det.get_params()}
    json.dumps(det.describe())  # meta.json records it
    assert cls.requires == frozenset()  # nothing from stored arrays
    for call in (det.fit, det.score):
        with pytest.raises(InputError, match=rf"semshift extract --score {name}\b"):
            call()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_scores_are_a_finite_vector_and_deterministic(name: str, dtype: str) -> None:
    model: ModelView = TinyAdapter()
    if dtype == "float32":
        model.module.float()
    x = _images(dtype=getattr(torch, dtype))
    before, params = x.clone(), [p.detach().clone() for p in model.module.parameters()]
    det = _ready(detectors.get(name), model)
    rng = torch.random.get_rng_state()
    s = det.score_batch(model, x)
    assert s.shape == (6,) and s.dtype == getattr(torch, dtype)
    assert torch.isfinite(s).all() and float(s.max() - s.min()) > 0
    torch.testing.assert_close(det.score_batch(model, x), s, rtol=0, atol=0)
    again = _ready(detectors.get(name), model)  # fitting is deterministic too
    torch.testing.assert_close(again.score_batch(model, x), s, rtol=0, atol=0)
    # inputs, weights, modes and the caller's random state are left as they were
    torch.testing.assert_close(x, before, rtol=0, atol=0)
    for p, q in zip(model.module.parameters(), params, strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert not any(m.training for m in model.module.modules())
    assert torch.equal(torch.random.get_rng_state(), rng)
    # extraction calls it under inference mode: same scores
    with torch.inference_mode():
        torch.testing.assert_close(det.score_batch(model, x), s, rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_each_declared_need_is_checked(name: str) -> None:
    det = detectors.get(name)
    assert det.unavailable(TinyAdapter()) is None
    lacking = {
        "feature_map": TinyAdapter(feature_map=False),
        "dropout": TinyAdapter(dropout=False),
        "layers": TinyAdapter(layers=False),
    }
    assert set(lacking) == set(MODEL_NEEDS) - {"grad"}  # every model has gradients
    for need, model in lacking.items():
        reason = det.unavailable(model)
        if need not in det.model_requires:
            assert reason is None
            continue
        assert reason is not None and "\n" not in reason and "'tiny'" in reason
        with pytest.raises(InputError, match=rf"^{name}: model 'tiny' "):
            det.score_batch(model, _images())


@pytest.mark.parametrize("name", NAMES)
def test_bad_inputs_are_one_line_errors(name: str) -> None:
    model = TinyAdapter()
    det = _ready(detectors.get(name), model)
    bad = [
        _images()[0],  # one image without the batch axis
        _images().to(torch.int64),
        _images().numpy(),
    ]
    for x in bad:
        with pytest.raises(InputError, match=rf"^{name}\.score_batch: x must be a floating-point"):
            det.score_batch(model, x)
    for param in detectors.get_class(name).param_names():  # checked again on each batch
        det = detectors.get(name)
        setattr(det, param, "bad")
        with pytest.raises(InputError, match=rf"^{name}: {param} must be"):
            det.score_batch(model, _images())


@pytest.mark.parametrize("name", NAMES)
def test_the_executor_stores_what_score_batch_gives(name: str, tmp_path) -> None:
    from PIL import Image

    from semshift.features import open_store
    from semshift.features.data import ImageDataset, image_folder
    from semshift.features.extract import extract
    from semshift.features.model_detectors import check_model_detectors, get_model_detector

    rng = np.random.default_rng(3)
    for k in range(5):
        (tmp_path / "imgs" / "a").mkdir(parents=True, exist_ok=True)
        arr = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(arr).save(tmp_path / "imgs" / "a" / f"{k}.png")
    model = TinyAdapter()
    model.module.float()
    src = image_folder(tmp_path / "imgs")
    if detectors.get_class(name).fits:  # not fitted: refused before any image is read
        with pytest.raises(NotFittedError, match=rf"^{name}\.score_batch: fit it"):
            extract(model, src, tmp_path / "unfitted", scores=(name,), progress=False)
        assert not (tmp_path / "unfitted").exists()
    det = _ready(detectors.get(name), model)
    extract(model, src, tmp_path / "s", preset="resize8-crop8", batch_size=5, shard_size=5,
            device="cpu", scores=(det,), progress=False, fsync=False)  # fmt: skip
    st = open_store(tmp_path / "s")
    assert st.meta["scores"][name] == det.describe()
    ds = ImageDataset(src, "resize8-crop8", model.mean, model.std)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    want = det.score_batch(model, x).numpy()
    np.testing.assert_allclose(st.arrays(name)[0], want, rtol=1e-5, atol=1e-6)
    # a model lacking a declared need is refused before any image is read
    for lacking in (TinyAdapter(feature_map=False), TinyAdapter(dropout=False),
                    TinyAdapter(layers=False)):  # fmt: skip
        det = get_model_detector(name)
        if det.unavailable(lacking) is not None:
            with pytest.raises(InputError, match=rf"^{name}: model 'tiny' "):
                check_model_detectors([det], [lacking])
            with pytest.raises(InputError, match=rf"^{name}: model 'tiny' "):
                extract(lacking, src, tmp_path / "refused", scores=(name,), progress=False)
            assert not (tmp_path / "refused").exists()


def test_a_run_leaves_out_what_the_model_cannot_compute(tmp_path) -> None:
    """Through a run config, with a model that has neither a feature map nor dropout: each
    model-level detector is computed or left out with a note, as its declaration says."""
    from PIL import Image
    from tests.tiny_model import register_tiny_cnn

    from semshift.features.models import MODELS
    from semshift.run import run

    model_name = register_tiny_cnn()
    rng = np.random.default_rng(0)
    for split, classes in {"train": "rgb", "test": "rgb", "ood": "k"}.items():
        for c in classes:
            (tmp_path / split / c).mkdir(parents=True)
            for k in range(4):
                arr = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
                Image.fromarray(arr).save(tmp_path / split / c / f"{k}.png")
    (tmp_path / "classes.txt").write_text("r\ng\nb\n")
    torch.manual_seed(0)
    weights = tmp_path / "tiny.pt"
    torch.save(MODELS[model_name].build(num_classes=3).module.state_dict(), weights)
    cfg = {
        "output": str(tmp_path / "out"),
        "classes": str(tmp_path / "classes.txt"),
        "model": {"name": model_name, "weights": str(weights), "num_classes": 3,
                  "preset": "resize16-crop16", "batch_size": 8, "shard_size": 16},
        "data": {
            "id_train": {"images": str(tmp_path / "train")},
            "id_test": {"images": str(tmp_path / "test")},
            "sets": {"ood": {"role": "ood", "split": "ood", "images": str(tmp_path / "ood")}},
        },
        "detectors": ["msp", *NAMES],
        "protocols": {"osr": {}},
        "bootstrap": {"n_resamples": 0},
    }  # fmt: skip
    run(cfg, progress=False)
    notes = json.loads((tmp_path / "out" / "results.json").read_text())["notes"]
    skipped = notes.get("skipped_model_level", {})
    adapter = MODELS[model_name].build(num_classes=3)
    for name in NAMES:
        reason = detectors.get(name).unavailable(adapter)
        assert skipped.get(name) == reason, name
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "out" / "scores" / "ood.parquet")
    computed = {n for n in NAMES if detectors.get(n).unavailable(adapter) is None}
    for n in NAMES:
        column = frame.get(f"score:{n}")
        if n in computed:
            assert column is not None and np.isfinite(column).all(), n
        else:  # no score column in the store: nothing scored
            assert column is None or column.isna().all(), n
