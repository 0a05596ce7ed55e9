"""gram (Gram matrices): known answers, agreement with pytorch-ood and with a port of OpenOOD
v1.5's code, direction, fitted state, bad inputs."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.demo.model import GlyphNet, GlyphNetAdapter  # noqa: E402
from semshift.detectors.gram import gram_deviation, gram_row_sums, holdout_mask  # noqa: E402
from semshift.errors import InputError, NotFittedError  # noqa: E402

from .glyph_shift import batches_of, id_images, shifted_images, trained_glyph  # noqa: E402


def _glyph(num_classes: int = 4, seed: int = 0) -> GlyphNetAdapter:
    """A random GlyphNet (widths 4, 4, 8, 8) in float64 whose BatchNorm statistics are not the
    identity (random running means and variances), so the block outputs vary in scale."""
    torch.manual_seed(seed)
    net = GlyphNet(num_classes, widths=(4, 4, 8, 8)).double()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return GlyphNetAdapter(net.eval())


def _data(n: int, num_classes: int = 4, seed: int = 0) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.normal(size=(n, 3, 32, 32)))
    y = torch.from_numpy(rng.integers(0, num_classes, n))
    y[:num_classes] = torch.arange(num_classes)  # every class present
    return x, y


def _held_out(y: Any) -> np.ndarray:
    """Positions of the held-out images: every 10th of each class in order (by hand)."""
    seen: Counter[int] = Counter()
    out = []
    for label in y.tolist():
        seen[label] += 1
        out.append(seen[label] % 10 == 0)
    return np.array(out)


def _literal_stats(t: Any, p: int) -> Any:
    """Row sums of the p-th order Gram matrix as pytorch-ood and OpenOOD write it."""
    temp = t.detach() ** p
    temp = temp.reshape(temp.shape[0], temp.shape[1], -1)
    temp = torch.matmul(temp, temp.transpose(dim0=2, dim1=1)).sum(dim=2)
    return (temp.sign() * torch.abs(temp) ** (1 / p)).reshape(temp.shape[0], -1)


def test_row_sums_equal_the_gram_matrix_rows() -> None:
    rng = np.random.default_rng(0)
    t = torch.from_numpy(rng.normal(size=(3, 5, 4, 6)))  # negative values too
    got = gram_row_sums(t, 4)
    assert got.shape == (3, 4, 5) and got.dtype == torch.float64
    for p in range(1, 5):
        torch.testing.assert_close(got[:, p - 1], _literal_stats(t, p), rtol=1e-12, atol=1e-12)
    # vectors: one position per channel; tokens (n, L, D): D channels over L positions
    v = torch.from_numpy(rng.normal(size=(3, 7)))
    torch.testing.assert_close(gram_row_sums(v, 2), gram_row_sums(v.reshape(3, 7, 1, 1), 2))
    tok = torch.from_numpy(rng.normal(size=(3, 9, 5)))
    torch.testing.assert_close(
        gram_row_sums(tok, 3), gram_row_sums(tok.transpose(1, 2).reshape(3, 5, 9, 1), 3)
    )
    # chunked over the batch when large: same values
    import semshift.detectors.gram as gram_module

    old = gram_module._CHUNK_ELEMENTS
    try:
        gram_module._CHUNK_ELEMENTS = 1
        torch.testing.assert_close(gram_row_sums(t, 4), got, rtol=0, atol=0)
    finally:
        gram_module._CHUNK_ELEMENTS = old


def test_deviation_known_answer() -> None:
    lo = torch.tensor([[[1.0, -2.0]]], dtype=torch.float64)
    hi = torch.tensor([[[3.0, 4.0]]], dtype=torch.float64)
    g = torch.tensor([[[0.5, 6.0]], [[2.0, 0.0]]], dtype=torch.float64)
    want = [0.5 / (1 + 1e-6) + 2.0 / (4 + 1e-6), 0.0]
    got = gram_deviation(g, lo.expand(2, 1, 2), hi.expand(2, 1, 2))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-15)


def test_holdout_is_every_tenth_image_of_a_class_across_batches() -> None:
    y = torch.from_numpy(np.random.default_rng(1).integers(0, 3, 95))
    seen = torch.zeros(3, dtype=torch.int64)
    parts = []
    for lo in range(0, 95, 13):
        held, seen = holdout_mask(y[lo : lo + 13], seen)
        parts.append(held.numpy())
    np.testing.assert_array_equal(np.concatenate(parts), _held_out(y))
    assert seen.tolist() == torch.bincount(y, minlength=3).tolist()


def test_fitted_state_known_answer() -> None:
    """Ranges over the kept images, E[delta] over the held-out ones, by hand; a class without
    training images takes the range over all classes."""
    model = _glyph(num_classes=5)
    x, y = _data(70, num_classes=4)  # class 4 of the head has no training image
    det = detectors.get("gram", max_power=3).fit_model(model, batches_of(x, y, 16))
    held = torch.from_numpy(_held_out(y))
    with torch.no_grad():
        _, _, outs = model.layer_outputs(x)
    stats = [gram_row_sums(o, 3) for o in outs]
    for s, lo, hi in zip(stats, det.mins_, det.maxs_, strict=True):
        assert lo.shape == (5, 3, s.shape[2])
        for c in range(4):
            keep = (y == c) & ~held
            np.testing.assert_allclose(lo[c], s[keep].amin(0).numpy(), rtol=1e-12)
            np.testing.assert_allclose(hi[c], s[keep].amax(0).numpy(), rtol=1e-12)
        np.testing.assert_allclose(lo[4], lo[:4].min(0), rtol=1e-12)
        np.testing.assert_allclose(hi[4], hi[:4].max(0), rtol=1e-12)
    yh = y[held]
    for s, lo, hi, norm in zip(stats, det.mins_, det.maxs_, det.norms_, strict=True):
        dev = gram_deviation(s[held], torch.from_numpy(lo)[yh], torch.from_numpy(hi)[yh])
        mean = float(dev.mean())
        assert norm == pytest.approx(mean if mean > 0 else 1.0, rel=1e-12)
    assert det.class_counts_.tolist() == [int(((y == c) & ~held).sum()) for c in range(4)] + [0]
    # the fit does not depend on the batch size
    again = detectors.get("gram", max_power=3).fit_model(model, batches_of(x, y, 7))
    assert again.state_digest() == det.state_digest()


def _pood_split(monkeypatch: Any) -> None:
    """Make pytorch-ood's random hold-out (``torch.randperm``) the every-10th one."""
    real = torch.randperm

    def randperm(n: int, *args: Any, **kwargs: Any) -> Any:
        ks = np.arange(n)
        held = ks[ks % 10 == 9]
        return torch.from_numpy(np.concatenate([held, ks[ks % 10 != 9]]))

    monkeypatch.setattr(torch, "randperm", randperm)
    assert real is not torch.randperm


@pytest.mark.parametrize("max_power", [5, 2])
def test_agrees_with_pytorch_ood(monkeypatch: Any, max_power: int) -> None:
    """pytorch-ood 0.4.0's ``Gram`` on the same blocks and the same held-out images gives minus
    the scores of ``divide_by_msp=False``."""
    pood = pytest.importorskip("pytorch_ood.detector")
    model = _glyph()
    x, y = _data(90)
    xt = torch.from_numpy(np.random.default_rng(5).normal(size=(40, 3, 32, 32)))
    xt[20:] *= 1.5  # some images further out
    ours = detectors.get("gram", max_power=max_power, divide_by_msp=False)
    ours.fit_model(model, batches_of(x, y, 16))
    s = ours.score_batch(model, xt)
    net = model.module
    trunk = net.trunk
    ref = pood.Gram(
        head=nn.Sequential(net.pool, nn.Flatten(1), net.fc),
        feature_layers=[trunk[0:3], trunk[3:7], trunk[7:11], trunk[11:15]],
        num_classes=4,
        num_poles_list=list(range(1, max_power + 1)),
    )
    ref.to("cpu")
    _pood_split(monkeypatch)
    ref.fit([(x[lo : lo + 16], y[lo : lo + 16]) for lo in range(0, 90, 16)])
    np.testing.assert_allclose(ref.layer_norm.numpy(), ours.norms_, rtol=1e-5)
    theirs = -ref.predict(xt)
    rho = spearmanr(s.numpy(), theirs.numpy())[0]
    assert rho >= 0.999, rho
    torch.testing.assert_close(s, theirs.double(), rtol=1e-5, atol=1e-5)
    assert float(s.std()) > 0


# -- a literal port of OpenOOD v1.5's gram_postprocessor.py (sample_estimator, get_deviations),
# with its FeatureExtractor (hooks on every Conv2d and ReLU) replaced by the adapter's block
# outputs, random.sample replaced by the given held-out positions, and .cuda() removed.


def _openood_G_p(ob: Any, p: int) -> Any:
    temp = ob.detach()
    temp = temp**p
    temp = temp.reshape(temp.shape[0], temp.shape[1], -1)
    temp = (torch.matmul(temp, temp.transpose(dim0=2, dim1=1))).sum(dim=2)
    temp = (temp.sign() * torch.abs(temp) ** (1 / p)).reshape(temp.shape[0], -1)
    return temp


def _openood_delta(mins: Any, maxs: Any, x: Any) -> Any:
    dev = (F.relu(mins - x) / torch.abs(mins + 10**-6)).sum(dim=1, keepdim=True)
    dev += (F.relu(x - maxs) / torch.abs(maxs + 10**-6)).sum(dim=1, keepdim=True)
    return dev


def _openood_sample_estimator(model: Any, train_loader: Any, num_classes: int, powers: Any,
                              val_idxs: dict[int, list[int]]) -> Any:  # fmt: skip
    gram_features: Any = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: None)))
    mins = dict()
    maxs = dict()
    class_counts: Counter[int] = Counter()
    for batch in train_loader:
        data = batch["data"]
        label = batch["label"]
        _, feature_list = model(data, return_feature_list=True)
        class_counts.update(Counter(label.cpu().numpy()))
        for layer_idx, feature in enumerate(feature_list):
            for power in powers:
                gram_feature = _openood_G_p(feature, power).cpu()
                for class_ in range(num_classes):
                    if gram_features[layer_idx][power][class_] is None:
                        gram_features[layer_idx][power][class_] = gram_feature[label == class_]
                    else:
                        gram_features[layer_idx][power][class_] = torch.cat(
                            [gram_features[layer_idx][power][class_],
                             gram_feature[label == class_]], dim=0)  # fmt: skip
    train_idxs = {}
    for c in class_counts:
        L = class_counts[c]
        train_idxs[c] = list(set(range(L)) - set(val_idxs[c]))
    normalize_factors = []
    for layer_idx in gram_features:
        total_delta = None
        for class_ in class_counts:
            trn = train_idxs[class_]
            val = val_idxs[class_]
            class_deltas = 0
            for power in powers:
                feats = gram_features[layer_idx][power][class_]
                mins[layer_idx, power, class_] = feats[trn].min(dim=0, keepdim=True)[0]
                maxs[layer_idx, power, class_] = feats[trn].max(dim=0, keepdim=True)[0]
                class_deltas += _openood_delta(
                    mins[layer_idx, power, class_], maxs[layer_idx, power, class_], feats[val]
                )
            if total_delta is None:
                total_delta = class_deltas
            else:
                total_delta = torch.cat([total_delta, class_deltas], dim=0)
        normalize_factors.append(total_delta.mean(dim=0, keepdim=True))
    normalize_factors = torch.cat(normalize_factors, dim=1)
    return mins, maxs, normalize_factors


def _openood_get_deviations(model: Any, data: Any, mins: Any, maxs: Any,
                            normalize_factors: Any, powers: Any) -> Any:  # fmt: skip
    deviations = torch.zeros(data.shape[0], 1)
    logits, feature_list = model(data, return_feature_list=True)
    confs = F.softmax(logits, dim=1).cpu().detach()
    confs, preds = confs.max(dim=1)
    for layer_idx, feature in enumerate(feature_list):
        n = normalize_factors[:, layer_idx].item()
        for power in powers:
            gram_feature = _openood_G_p(feature, power).cpu()
            for class_ in range(logits.shape[1]):
                deviations[preds == class_] += (
                    _openood_delta(mins[layer_idx, power, class_], maxs[layer_idx, power, class_],
                                   gram_feature[preds == class_]) / n
                )  # fmt: skip
    return preds, -deviations / confs[:, None]


def test_agrees_with_a_port_of_openood() -> None:
    """Default (``divide_by_msp=True``) scores equal OpenOOD v1.5's on the same blocks and
    held-out images (its ``deviations`` buffer is float32, hence the tolerance)."""
    model = _glyph()
    x, y = _data(90)
    xt = torch.from_numpy(np.random.default_rng(6).normal(size=(40, 3, 32, 32)))
    xt[20:] *= 1.5
    ours = detectors.get("gram").fit_model(model, batches_of(x, y, 16))
    s = ours.score_batch(model, xt)

    def net(data: Any, return_feature_list: bool = True) -> Any:
        logits, _, outs = model.layer_outputs(data)
        return logits, outs

    held = _held_out(y)
    val_idxs = {
        c: [k for k, h in enumerate(held[y.numpy() == c]) if h] for c in range(4)
    }  # positions within each class, as random.sample(range(L), int(0.1 * L)) gives
    assert all(len(v) == int(0.1 * int((y == c).sum())) for c, v in val_idxs.items())
    loader = [{"data": x[lo : lo + 16], "label": y[lo : lo + 16]} for lo in range(0, 90, 16)]
    with torch.no_grad():
        mins, maxs, norms = _openood_sample_estimator(net, loader, 4, [1, 2, 3, 4, 5], val_idxs)
        _, theirs = _openood_get_deviations(net, xt, mins, maxs, norms, [1, 2, 3, 4, 5])
    np.testing.assert_allclose(norms.numpy().ravel(), ours.norms_, rtol=1e-12)
    theirs = theirs.ravel()
    rho = spearmanr(s.numpy(), theirs.numpy())[0]
    assert rho >= 0.999, rho
    torch.testing.assert_close(s, theirs.double(), rtol=1e-5, atol=1e-6)
    assert float(s.std()) > 0


def test_id_scores_higher_than_shifted_images() -> None:
    model = trained_glyph()
    x, y = id_images(60, seed=2)
    det = detectors.get("gram").fit_model(model, batches_of(x, y))
    x_id, _ = id_images(20, seed=1)
    s_id = det.score_batch(model, x_id).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))], np.r_[s_id, s_ood])
    assert auroc > 0.95, auroc
    # the training images themselves are inside their class's ranges: deviation 0 but for
    # the held-out ones
    s_train = det.score_batch(model, x).numpy()
    with torch.no_grad():
        right = (model(x)[0].argmax(1) == y).numpy()
    kept = right & ~_held_out(y)
    assert kept.sum() > 100 and np.all(s_train[kept] == 0)


def test_batch_independence_dtypes_and_saved_state(tmp_path: Any) -> None:
    model = _glyph()
    x, y = _data(50)
    det = detectors.get("gram").fit_model(model, batches_of(x, y, 16))
    xt = torch.from_numpy(np.random.default_rng(7).normal(size=(8, 3, 32, 32)))
    full = det.score_batch(model, xt)
    assert full.dtype == torch.float64
    torch.testing.assert_close(det.score_batch(model, xt[3:6]), full[3:6], rtol=1e-12, atol=0)
    loaded = detectors.get("gram").load_state_file(det.save_state(tmp_path / "gram.npz"))
    torch.testing.assert_close(loaded.score_batch(model, xt), full, rtol=0, atol=0)
    model.module.float()
    s32 = det.score_batch(model, xt.float())
    assert s32.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # full precision under mixed precision
        torch.testing.assert_close(det.score_batch(model, xt.float()), s32, rtol=0, atol=0)
    np.testing.assert_allclose(s32.numpy(), full.numpy(), rtol=1e-3, atol=1e-3)


def test_bad_inputs() -> None:
    for bad, message in [
        ({"max_power": 0}, r"^gram: max_power must be an integer >= 1, got 0$"),
        ({"max_power": 2.5}, r"^gram: max_power must be an integer >= 1, got 2.5$"),
        ({"divide_by_msp": 1}, r"^gram: divide_by_msp must be a boolean \(true or false\)"),
        ({"powers": 5}, r"^gram has no hyperparameter powers; accepted: "),
    ]:
        with pytest.raises(InputError, match=message):
            detectors.get("gram", **bad)
    model = _glyph()
    x, y = _data(20)
    with pytest.raises(NotFittedError, match=r"^gram\.score_batch: fit it"):
        detectors.get("gram").score_batch(model, x)
    for labels, label in [(y + 4, 7), (y - 1, -1)]:
        with pytest.raises(InputError, match=rf"^gram\.fit_model: label {label} outside the "):
            detectors.get("gram").fit_model(model, batches_of(x, labels))
    with pytest.raises(InputError, match=r"^gram\.fit_model: no training image"):
        detectors.get("gram").fit_model(model, lambda: iter(()))
    det = detectors.get("gram").fit_model(model, batches_of(x, y))
    with pytest.raises(InputError, match=r"^gram\.score_batch: the model's block outputs do "):
        det.score_batch(_glyph(num_classes=3), x)
    with pytest.raises(InputError, match=r"^gram\.score: gram is a model-level detector"):
        det.score(logits=np.zeros((2, 2)))


def test_doctests() -> None:
    import doctest

    import semshift.detectors.gram as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
