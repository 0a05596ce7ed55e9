"""Model-level detectors (odin, rankfeat): closed forms, identities, and score columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp, softmax
from torch import nn

from semshift import detectors
from semshift.detectors.odin import Odin
from semshift.detectors.rankfeat import RankFeat
from semshift.errors import InputError, UnknownNameError
from semshift.features import open_store
from semshift.features.data import ImageDataset, image_folder
from semshift.features.extract import extract
from semshift.features.model_detectors import get_model_detector
from semshift.features.models import HookAdapter, load_model


def _linear_adapter(c=5, seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, c)).double()
    return HookAdapter("lin", net)


def test_odin_closed_form_for_a_linear_model():
    """f(x) = W x + b: grad_x -log softmax(f/T)_y = W^T (p - e_y) / T, so x' is explicit."""
    adapter = _linear_adapter()
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(6, 3, 4, 4)))
    t, eps = 1000.0, 0.0014
    got = Odin(temperature=t, epsilon=eps).score_batch(adapter, x).numpy()
    w, b = (p.detach().numpy() for p in adapter.module[1].parameters())
    xf = x.numpy().reshape(6, -1)
    p = softmax((xf @ w.T + b) / t, axis=1)
    onehot = np.eye(5)[p.argmax(1)]
    grad = (p - onehot) @ w / t
    std = np.repeat(np.asarray(adapter.std), 16)  # channel-major, like the flattened input
    x2 = xf - eps * np.sign(grad) / std
    want = softmax((x2 @ w.T + b) / t, axis=1).max(1)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # the perturbation raises the predicted class's score: ODIN >= the plain tempered MSP
    assert np.all(want >= p.max(1) - 1e-15) and np.any(want > p.max(1))
    # epsilon 0 is the temperature-scaled MSP of the logits
    plain = Odin(temperature=t, epsilon=0.0).score_batch(adapter, x).numpy()
    np.testing.assert_allclose(plain, p.max(1), rtol=1e-12)


def test_rankfeat_matches_numpy_svd():
    adapter = load_model("resnet18", random_init=True, seed=0, num_classes=6)
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(3, 3, 64, 64))).float()
    got = RankFeat().score_batch(adapter, x).numpy()
    with torch.no_grad():
        fmap = adapter.feature_map(x).numpy().astype(np.float64)
    n, c, h, w = fmap.shape
    flat = fmap.reshape(n, c, h * w)
    u, s, vh = np.linalg.svd(flat, full_matrices=False)
    rest = flat - s[:, :1, None] * (u[:, :, :1] @ vh[:, :1, :])
    feats = rest.mean(axis=2)
    wh, bh = adapter.head_weights()
    want = logsumexp(feats @ wh.T.astype(np.float64) + bh, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_rankfeat_removes_a_rank_one_map_entirely(monkeypatch):
    """A rank-1 feature map leaves nothing: logits = b, score = logsumexp(b)."""
    adapter = load_model("resnet18", random_init=True, seed=0, num_classes=4)
    with torch.no_grad():
        adapter.module.fc.bias.copy_(torch.tensor([0.5, -1.0, 2.0, 0.0]))
    rng = np.random.default_rng(2)
    u, v = rng.normal(size=(2, 512, 1)), rng.normal(size=(2, 1, 9))
    rank1 = torch.from_numpy((u @ v).reshape(2, 512, 3, 3)).float()
    monkeypatch.setattr(adapter, "feature_map", lambda x: rank1)
    got = RankFeat().score_batch(adapter, torch.zeros(2, 3, 8, 8)).numpy()
    np.testing.assert_allclose(got, logsumexp([0.5, -1.0, 2.0, 0.0]), atol=1e-4)


def test_registry_and_bad_input():
    odin = get_model_detector("odin", temperature=10)
    assert odin.get_params() == {"temperature": 10, "epsilon": 0.0014}
    assert odin.describe() == {"name": "odin", "temperature": 10.0, "epsilon": 0.0014}
    assert isinstance(odin.describe()["temperature"], float)  # as meta.json records it
    known = ", ".join(detectors.list_detectors(level="model"))
    with pytest.raises(
        UnknownNameError,
        match=r"^unknown model-level detector 'odn' \(did you mean odin(, iodin)?\?\); "
        rf"known: {known}$",
    ):  # fmt: skip
        get_model_detector("odn")
    post_hoc = r"^'knn' is a post-hoc detector .*; model-level: "
    with pytest.raises(InputError, match=post_hoc + known + "$"):
        get_model_detector("knn")
    with pytest.raises(InputError, match=r"^odin: temperature must be a number > 0, got 0$"):
        Odin(temperature=0).check(_linear_adapter())
    with pytest.raises(InputError, match=r"^odin: epsilon must be a number >= 0, got -1$"):
        get_model_detector("odin", epsilon=-1)
    with pytest.raises(InputError, match=r"has no hyperparameter T; accepted: temperature, eps"):
        get_model_detector("odin", T=1)
    with pytest.raises(InputError, match=r"has no hyperparameter k; accepted: \(none\)"):
        get_model_detector("rankfeat", k=1)
    with pytest.raises(
        InputError, match=r"^rankfeat: model 'lin' exposes no feature map \(CNN adapters only\)$"
    ):
        RankFeat().score_batch(_linear_adapter(), torch.zeros(1, 3, 4, 4, dtype=torch.float64))


def test_extraction_builds_the_registry_entries():
    """Names, defaults, what each needs and the computation live in one registry entry."""
    for name in detectors.list_detectors(level="model"):
        det = get_model_detector(name)
        assert type(det) is detectors.get_class(name) and det.name == name
        assert det.get_params() == detectors.get(name).get_params()
    assert Odin.needs_grad and RankFeat.needs_feature_map
    assert Odin.model_requires == {"grad"} and RankFeat.model_requires == {"feature_map"}
    with pytest.raises(TypeError, match=r"model_requires names \['gradients'\], not among"):

        class Undeclared(detectors.ModelLevelDetector):
            model_requires = frozenset({"gradients"})


def test_scores_stored_as_columns(tmp_path, images):
    model = load_model("timm/test_resnet", random_init=True, num_classes=3)
    src = image_folder(images)
    extract(
        model, src, tmp_path / "s", preset="resize36-crop32", shard_size=5, batch_size=4,
        scores=("odin", "rankfeat"), progress=False, fsync=False,
    )  # fmt: skip
    st = open_store(tmp_path / "s")
    assert st.array_specs["odin"] == {"shape": [], "dtype": "float32"}
    assert st.meta["scores"]["odin"] == {"name": "odin", "temperature": 1000.0, "epsilon": 0.0014}
    odin, rank = st.arrays("odin", "rankfeat")
    assert odin.shape == rank.shape == (len(src),)
    ds = ImageDataset(src, "resize36-crop32", model.mean, model.std)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    np.testing.assert_allclose(odin, Odin().score_batch(model, x).numpy(), rtol=1e-5)
    np.testing.assert_allclose(rank, RankFeat().score_batch(model, x).numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(InputError, match="score names must be distinct"):
        extract(model, src, tmp_path / "t", scores=("odin", "odin"))


def test_odin_ignores_autocast():
    """Under (CUDA or CPU) autocast ODIN still runs in float32: T = 1000 needs the precision."""
    model = load_model("resnet18", random_init=True, seed=0, num_classes=5)
    x = torch.from_numpy(np.random.default_rng(3).normal(size=(2, 3, 32, 32))).float()
    plain = Odin().score_batch(model, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = Odin().score_batch(model, x)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, plain, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(5, 16, 9), (5, 6, 20), (3, 8, 8)])
def test_rank1_component_equals_the_truncated_svd_term(shape):
    """Both Gram branches (HW <= C and HW > C) give the SVD's s1 u1 v1^T."""
    from semshift.detectors.rankfeat import rank1_component

    rng = np.random.default_rng(sum(shape))
    flat = rng.standard_normal(shape)
    u, s, vh = np.linalg.svd(flat, full_matrices=False)
    want = s[:, :1, None] * (u[:, :, :1] @ vh[:, :1, :])
    got64 = rank1_component(torch.from_numpy(flat)).numpy()
    np.testing.assert_allclose(got64, want, atol=1e-10)
    got32 = rank1_component(torch.from_numpy(flat).float())
    assert got32.dtype == torch.float32
    np.testing.assert_allclose(got32.numpy(), want, atol=1e-5)
