"""mds_ensemble, multi_mahalanobis and mahalanobis_odin (class Gaussians on network features):
the streaming fit, agreement with pytorch-ood and with a port of OpenOOD v1.5's code,
direction, fitted state, bad inputs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import sklearn.covariance  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402
from torch import nn  # noqa: E402
from torch.autograd import Variable  # noqa: E402

from semshift import detectors  # noqa: E402
from semshift.demo.model import GlyphNet, GlyphNetAdapter  # noqa: E402
from semshift.detectors.class_gaussians import ClassMoments, input_step  # noqa: E402
from semshift.errors import InputError, NotFittedError  # noqa: E402

from .glyph_shift import batches_of, id_images, shifted_images, trained_glyph  # noqa: E402

NAMES = ("mds_ensemble", "multi_mahalanobis", "mahalanobis_odin")


class SkewedGlyph(GlyphNetAdapter):
    """GlyphNet with a normalisation whose std differs per channel (the step is epsilon / std)."""

    mean = (0.4, 0.5, 0.6)
    std = (0.2, 0.3, 0.4)


def _det(name: str, **params: Any) -> Any:
    """The registered model-level detector ``name`` (typed loosely for the tests)."""
    return detectors.get(name, **params)


def _glyph(
    num_classes: int = 4, seed: int = 0, widths: Any = (4, 4, 8, 8), cls: Any = GlyphNetAdapter
) -> Any:
    """A random GlyphNet in float64 whose BatchNorm statistics are not the identity (small
    running variances: block outputs of a well-conditioned covariance, large against
    pytorch-ood's 1e-6 ridge)."""
    torch.manual_seed(seed)
    net = GlyphNet(num_classes, widths=widths).double()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert m.running_mean is not None and m.running_var is not None
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.01, 0.04)
    return cls(net.eval())


def _data(n: int, num_classes: int = 4, seed: int = 0) -> tuple[Any, Any]:
    """Noise images with a per-image and a per-class brightness in each channel, so that the
    pooled block outputs vary between images (the means of pure noise over 1,024 positions
    hardly do, which makes pytorch-ood's 1e-6 ridge count)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, n)
    y[:num_classes] = np.arange(num_classes)  # every class present
    shade = rng.normal(size=(n, 3, 1, 1)) + 0.8 * np.eye(3)[y % 3][:, :, None, None]
    x = torch.from_numpy(rng.normal(size=(n, 3, 32, 32)) + shade)
    return x, torch.from_numpy(y)


@contextlib.contextmanager
def _default_float64() -> Iterator[None]:
    """pytorch-ood and OpenOOD create their statistics in the default dtype: float64 here."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _pooled(model: Any, x: Any) -> list[Any]:
    with torch.no_grad():
        return [o.mean(dim=(2, 3)) for o in model.layer_outputs(x)[2]]


# -- the streaming fit ------------------------------------------------------------------------
def test_class_moments_equal_sklearn_on_class_centred_vectors() -> None:
    rng = np.random.default_rng(0)
    g = rng.normal(size=(70, 5)) * [1, 2, 3, 4, 5] + 100.0  # a large common offset
    y = rng.integers(0, 4, 70)
    y[-1] = 5  # class 4 has no vector, class 5 appears in the last batch only
    m = ClassMoments()
    for lo, hi in [(0, 3), (3, 40), (40, 40), (40, 70)]:
        m.update(torch.from_numpy(g[lo:hi]), torch.from_numpy(y[lo:hi]))
    classes, means, cov = m.finish()
    assert classes.tolist() == [0, 1, 2, 3, 5]
    want_means = np.stack([g[y == c].mean(axis=0) for c in classes])
    np.testing.assert_allclose(means, want_means, rtol=1e-13)
    centred = g - want_means[np.searchsorted(classes, y)]
    want = sklearn.covariance.EmpiricalCovariance(assume_centered=False).fit(centred)
    np.testing.assert_allclose(cov, want.covariance_, rtol=1e-11, atol=1e-12)
    with pytest.raises(ValueError, match="no vector"):
        ClassMoments().finish()


def test_fitted_state_known_answer_in_one_pass() -> None:
    model = _glyph()
    x, y = _data(60)
    passes = []

    def batches() -> Any:
        passes.append(1)
        return batches_of(x, y, 16)()

    det = _det("multi_mahalanobis").fit_model(model, batches)
    assert len(passes) == 1  # one streaming pass
    assert det.classes_.tolist() == [0, 1, 2, 3]
    for g, mu, proj in zip(_pooled(model, x), det.means_, det.projections_, strict=True):
        g = g.numpy()
        want_mu = np.stack([g[y.numpy() == c].mean(axis=0) for c in range(4)])
        np.testing.assert_allclose(mu, want_mu, rtol=1e-12, atol=1e-14)
        est = sklearn.covariance.EmpiricalCovariance().fit(g - want_mu[y.numpy()])
        np.testing.assert_allclose(proj @ proj.T, est.precision_, rtol=1e-8, atol=1e-8)
    # another batching gives the same state
    again = _det("multi_mahalanobis").fit_model(model, batches_of(x, y, 7))
    for a, b in zip(det.projections_, again.projections_, strict=True):
        want = b @ b.T
        np.testing.assert_allclose(a @ a.T, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    # mahalanobis_odin fits the penultimate features
    odin = _det("mahalanobis_odin").fit_model(model, batches_of(x, y, 16))
    np.testing.assert_allclose(odin.means_[0], det.means_[-1], rtol=1e-12)


def test_input_step_signs() -> None:
    grad = torch.tensor([[[[0.5]], [[0.0]], [[-2.0]]]])
    plus = input_step(grad, (0.5, 0.25, 1.0), zero="plus").flatten().tolist()
    zero = input_step(grad, (0.5, 0.25, 1.0), zero="zero").flatten().tolist()
    assert plus == [2.0, 4.0, -1.0] and zero == [2.0, 0.0, -1.0]


def test_multi_mahalanobis_is_the_sum_of_weighted_block_scores() -> None:
    """Known answer from sklearn's precision: sum_l alpha_l max_c -0.5 MD_lc."""
    model = _glyph()
    x, y = _data(60)
    xt, _ = _data(9, seed=3)
    alphas = [0.5, 0.0, 2.0]
    det = _det("multi_mahalanobis", alphas=alphas).fit_model(model, batches_of(x, y))
    assert len(det.means_) == 2  # the zero weight and the last block are not fitted
    want = np.zeros(len(xt))
    for w, g, gt in zip(alphas, _pooled(model, x), _pooled(model, xt), strict=False):
        if w == 0:
            continue
        g, gt = g.numpy(), gt.numpy()
        mu = np.stack([g[y.numpy() == c].mean(axis=0) for c in range(4)])
        prec = sklearn.covariance.EmpiricalCovariance().fit(g - mu[y.numpy()]).precision_
        d = gt[:, None, :] - mu[None]
        want += w * (-0.5 * np.einsum("ncd,de,nce->nc", d, prec, d)).max(axis=1)
    np.testing.assert_allclose(det.score_batch(model, xt).numpy(), want, rtol=1e-8)
    # mds_ensemble without pre-processing is the same score
    mds = _det("mds_ensemble", epsilon=0.0, alphas=alphas).fit_model(model, batches_of(x, y))
    torch.testing.assert_close(mds.score_batch(model, xt), det.score_batch(model, xt))


# -- agreement with pytorch-ood ---------------------------------------------------------------
def _loader(x: Any, y: Any, size: int = 16) -> Any:
    from torch.utils.data import DataLoader, TensorDataset

    return DataLoader(TensorDataset(x, y), batch_size=size, shuffle=False)


@pytest.mark.parametrize("alphas", [None, [0.5, 0.0, 2.0, 1.0]])
def test_multi_mahalanobis_agrees_with_pytorch_ood(alphas: Any) -> None:
    from pytorch_ood.detector import MultiMahalanobis

    model = _glyph()
    x, y = _data(80)
    xt, _ = _data(24, seed=5)
    ours = _det("multi_mahalanobis", alphas=alphas).fit_model(model, batches_of(x, y))
    s = ours.score_batch(model, xt)
    trunk = model.module.trunk  # its layers: the consecutive slices ending at each block
    with _default_float64():
        theirs = MultiMahalanobis([trunk[0:3], trunk[3:7], trunk[7:11], trunk[11:15]],
                                  alpha=alphas)  # fmt: skip
        theirs.fit(_loader(x, y))
        with torch.no_grad():
            t = theirs.predict(xt)
    rho = spearmanr(s.numpy(), -t.numpy()).statistic
    assert rho >= 0.999, rho
    # their covariance is the scatter (not divided by N) plus 1e-6 I: distances / N
    torch.testing.assert_close(s, -len(x) * t, rtol=1e-6, atol=1e-8)
    assert float(s.std()) > 0


@pytest.mark.parametrize("epsilon", [0.002, 0.02])
def test_mahalanobis_odin_agrees_with_pytorch_ood(epsilon: float) -> None:
    from pytorch_ood.detector import MahalanobisODIN

    model = _glyph(cls=SkewedGlyph)
    x, y = _data(80)
    xt, _ = _data(24, seed=5)
    ours = _det("mahalanobis_odin", epsilon=epsilon).fit_model(model, batches_of(x, y))
    s = ours.score_batch(model, xt)
    with _default_float64():
        theirs = MahalanobisODIN(model.features, eps=epsilon, norm_std=list(model.std))
        theirs.fit(_loader(x, y))
        t = theirs.predict(xt)
    rho = spearmanr(s.numpy(), -t.numpy()).statistic
    assert rho >= 0.999, rho
    torch.testing.assert_close(s, -len(x) * t.detach(), rtol=1e-6, atol=1e-8)
    # the pre-processing changes every score
    plain = _det("mahalanobis_odin", epsilon=0.0).fit_model(model, batches_of(x, y))
    assert float((s - plain.score_batch(model, xt)).abs().min()) > 0


# -- agreement with a port of OpenOOD v1.5 ----------------------------------------------------
# The functions below port openood/postprocessors/mds_ensemble_postprocessor.py (OpenOOD v1.5)
# line by line: `.cuda()` removed, progress bars dropped, the alphas as a tensor of the
# default dtype instead of torch.cuda.FloatTensor; the 'capca' reduction (not used by its
# configs) is left out.


def get_torch_feature_stat(feature: Any, only_mean: bool = False) -> Any:
    feature = feature.view([feature.size(0), feature.size(1), -1])
    feature_mean = torch.mean(feature, dim=-1)
    feature_var = torch.var(feature, dim=-1)
    if feature.size(-2) * feature.size(-1) == 1 or only_mean:
        # [N, C, 1, 1] does not need variance for kernel
        feature_stat = feature_mean
    else:
        feature_stat = torch.cat((feature_mean, feature_var), 1)
    return feature_stat


def process_feature_type(feature_temp: Any, feature_type: str) -> Any:
    if feature_type == "flat":
        feature_temp = feature_temp.view([feature_temp.size(0), -1])
    elif feature_type == "stat":
        feature_temp = get_torch_feature_stat(feature_temp)
    elif feature_type == "mean":
        feature_temp = get_torch_feature_stat(feature_temp, only_mean=True)
    else:
        raise ValueError("Unknown feature type")
    return feature_temp


def reduce_feature_dim(feature_list_full: Any, label_list_full: Any, feature_process: str) -> Any:
    if feature_process == "none":
        transform_matrix = np.eye(feature_list_full.shape[1])
    else:
        raise Exception("Unknown Process Type")
    return transform_matrix


def tensor2list(x: Any) -> Any:
    return x.data.cpu().tolist()


@torch.no_grad()
def get_MDS_stat(model, train_loader, num_classes, feature_type_list, reduce_dim_list):
    group_lasso = sklearn.covariance.EmpiricalCovariance(assume_centered=False)
    model.eval()
    num_layer = len(feature_type_list)
    feature_class: Any = [[None for x in range(num_classes)] for y in range(num_layer)]
    feature_all: Any = [None for x in range(num_layer)]
    label_list: Any = []
    # collect features
    for batch in train_loader:
        data = batch["data_aux"]
        label = batch["label"]
        _, feature_list = model(data, return_feature_list=True)
        label_list.extend(tensor2list(label))
        for layer_idx in range(num_layer):
            feature_type = feature_type_list[layer_idx]
            feature_processed = process_feature_type(feature_list[layer_idx], feature_type)
            if isinstance(feature_all[layer_idx], type(None)):
                feature_all[layer_idx] = tensor2list(feature_processed)
            else:
                feature_all[layer_idx].extend(tensor2list(feature_processed))
    label_list = np.array(label_list)
    # reduce feature dim and split by classes
    transform_matrix_list = []
    for layer_idx in range(num_layer):
        feature_sub = np.array(feature_all[layer_idx])
        transform_matrix = reduce_feature_dim(feature_sub, label_list, reduce_dim_list[layer_idx])
        transform_matrix_list.append(torch.Tensor(transform_matrix))
        feature_sub = np.dot(feature_sub, transform_matrix)
        for feature, label in zip(feature_sub, label_list, strict=True):
            feature = feature.reshape([-1, len(feature)])
            if isinstance(feature_class[layer_idx][label], type(None)):
                feature_class[layer_idx][label] = feature
            else:
                feature_class[layer_idx][label] = np.concatenate(
                    (feature_class[layer_idx][label], feature), axis=0
                )
    # calculate feature mean
    feature_mean_list = [
        [np.mean(feature_by_class, axis=0) for feature_by_class in feature_by_layer]
        for feature_by_layer in feature_class
    ]

    # calculate precision
    precision_list = []
    for layer in range(num_layer):
        X = []
        for k in range(num_classes):
            X.append(feature_class[layer][k] - feature_mean_list[layer][k])
        X = np.concatenate(X, axis=0)
        # find inverse
        group_lasso.fit(X)
        precision = group_lasso.precision_
        precision_list.append(precision)

    feature_mean_list = [torch.Tensor(np.array(i)) for i in feature_mean_list]
    precision_list = [torch.Tensor(p) for p in precision_list]

    return feature_mean_list, precision_list, transform_matrix_list


def compute_Mahalanobis_score(
    model: Any,
    data: Any,
    num_classes: int,
    sample_mean: Any,
    precision: Any,
    transform_matrix: Any,
    layer_index: int,
    feature_type_list: Any,
    magnitude: float,
    return_pred: bool = False,
) -> Any:
    # extract features
    _, out_features = model(data, return_feature_list=True)
    out_features = process_feature_type(out_features[layer_index], feature_type_list[layer_index])
    out_features = torch.mm(out_features, transform_matrix[layer_index])

    # compute Mahalanobis score
    gaussian_score: Any = 0
    for i in range(num_classes):
        batch_sample_mean = sample_mean[layer_index][i]
        zero_f = out_features.data - batch_sample_mean
        term_gau = -0.5 * torch.mm(torch.mm(zero_f, precision[layer_index]), zero_f.t()).diag()
        if i == 0:
            gaussian_score = term_gau.view(-1, 1)
        else:
            gaussian_score = torch.cat((gaussian_score, term_gau.view(-1, 1)), 1)

    # Input_processing
    sample_pred = gaussian_score.max(1)[1]
    batch_sample_mean = sample_mean[layer_index].index_select(0, sample_pred)
    zero_f = out_features - Variable(batch_sample_mean)
    pure_gau = (
        -0.5 * torch.mm(torch.mm(zero_f, Variable(precision[layer_index])), zero_f.t()).diag()
    )
    loss = torch.mean(-pure_gau)
    loss.backward()

    gradient = torch.ge(data.grad.data, 0)
    gradient = (gradient.float() - 0.5) * 2

    # here we use the default value of 0.5
    for c in range(3):
        index = torch.LongTensor([c])
        gradient.index_copy_(1, index, gradient.index_select(1, index) / 0.5)
    tempInputs = torch.add(data.data, gradient, alpha=-magnitude)

    with torch.no_grad():
        _, noise_out_features = model(Variable(tempInputs), return_feature_list=True)
        noise_out_features = process_feature_type(
            noise_out_features[layer_index], feature_type_list[layer_index]
        )
        noise_out_features = torch.mm(noise_out_features, transform_matrix[layer_index])

    noise_gaussian_score: Any = 0
    for i in range(num_classes):
        batch_sample_mean = sample_mean[layer_index][i]
        zero_f = noise_out_features.data - batch_sample_mean
        term_gau = -0.5 * torch.mm(torch.mm(zero_f, precision[layer_index]), zero_f.t()).diag()
        if i == 0:
            noise_gaussian_score = term_gau.view(-1, 1)
        else:
            noise_gaussian_score = torch.cat((noise_gaussian_score, term_gau.view(-1, 1)), 1)

    noise_gaussian_score, _ = torch.max(noise_gaussian_score, dim=1)
    if return_pred:
        return sample_pred, noise_gaussian_score
    return noise_gaussian_score


def openood_postprocess(net: Any, data: Any, stats: Any, alpha_list: Any, cfg: Any) -> Any:
    """``MDSEnsemblePostprocessor.postprocess`` with its state passed in."""
    feature_mean, feature_prec, transform_matrix = stats
    num_classes, feature_type_list, magnitude = cfg
    score_list: Any = None
    for layer_index in range(len(feature_type_list)):
        pred, score = compute_Mahalanobis_score(
            net, Variable(data, requires_grad=True), num_classes, feature_mean, feature_prec,
            transform_matrix, layer_index, feature_type_list, magnitude, return_pred=True,
        )  # fmt: skip
        if layer_index == 0:
            score_list = score.view([-1, 1])
        else:
            score_list = torch.cat((score_list, score.view([-1, 1])), 1)
    alpha = torch.tensor(alpha_list, dtype=torch.get_default_dtype())
    conf = torch.matmul(score_list, alpha)
    return pred, conf


class OpenOODGlyph(nn.Module):
    """GlyphNet with OpenOOD's ``forward(x, return_feature_list=True)``: the block outputs."""

    def __init__(self, net: Any) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: Any, return_feature_list: bool = False) -> Any:
        out, feature_list = x, []
        for m in self.net.trunk:
            out = m(out)
            if isinstance(m, nn.ReLU):
                feature_list.append(out)
        logits = self.net.fc(torch.flatten(self.net.pool(out), 1))
        return (logits, feature_list) if return_feature_list else logits


@pytest.mark.parametrize(
    ("epsilon", "alphas"),
    [(0.0014, None), (0.0014, [1.0, 0.5, 2.0, 1.0]), (0.02, [0.0, 1.0, 0.0, -0.5])],
)
def test_mds_ensemble_agrees_with_a_port_of_openood(epsilon: float, alphas: Any) -> None:
    model = _glyph()  # mean = std = 0.5: OpenOOD's hard-coded step divisor
    x, y = _data(80)
    xt, _ = _data(24, seed=5)
    det = _det("mds_ensemble", epsilon=epsilon, alphas=alphas)
    s = det.fit_model(model, batches_of(x, y)).score_batch(model, xt)
    alpha_list = [1.0] if alphas is None else alphas  # OpenOOD's config: alpha_list [1]
    types = ["mean"] * len(alpha_list)
    net = OpenOODGlyph(model.module)
    loader = [{"data_aux": x[lo : lo + 16], "label": y[lo : lo + 16]} for lo in range(0, 80, 16)]
    with _default_float64():
        stats = get_MDS_stat(net, loader, 4, types, ["none"] * len(types))
        _, conf = openood_postprocess(net, xt, stats, alpha_list, (4, types, epsilon))
    rho = spearmanr(s.numpy(), conf.detach().numpy()).statistic
    assert rho >= 0.999, rho
    torch.testing.assert_close(s, conf.detach(), rtol=1e-8, atol=1e-10)
    # the pre-processing matters
    plain = _det("mds_ensemble", epsilon=0.0, alphas=alphas)
    s0 = plain.fit_model(model, batches_of(x, y)).score_batch(model, xt)
    assert float((s - s0).abs().min()) > 0


# -- direction --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "params"),
    [("mds_ensemble", {}), ("mds_ensemble", {"alphas": [1.0, 1.0, 1.0, 1.0]}),
     ("multi_mahalanobis", {}), ("mahalanobis_odin", {})],
)  # fmt: skip
def test_id_scores_higher_than_shifted_images(name: str, params: dict[str, Any]) -> None:
    model = trained_glyph()
    x, y = id_images(60, seed=2)
    det = _det(name, **params).fit_model(model, batches_of(x, y))
    x_id, _ = id_images(20, seed=1)
    s_id = det.score_batch(model, x_id).numpy()
    s_ood = det.score_batch(model, shifted_images(60, seed=3)).numpy()
    auroc = roc_auc_score(np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))], np.r_[s_id, s_ood])
    assert auroc > 0.95, auroc


# -- fitted state, batches, dtypes ------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_batch_independence_dtypes_and_saved_state(name: str, tmp_path: Any) -> None:
    model = _glyph(cls=SkewedGlyph)
    x, y = _data(50)
    det = _det(name).fit_model(model, batches_of(x, y, 16))
    xt = torch.from_numpy(np.random.default_rng(7).normal(size=(8, 3, 32, 32)))
    full = det.score_batch(model, xt)
    assert full.dtype == torch.float64
    torch.testing.assert_close(det.score_batch(model, xt[3:6]), full[3:6], rtol=1e-10, atol=0)
    loaded = _det(name).load_state_file(det.save_state(tmp_path / "state.npz"))
    torch.testing.assert_close(loaded.score_batch(model, xt), full, rtol=0, atol=0)
    model.module.float()
    s32 = det.score_batch(model, xt.float())
    assert s32.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # full precision under mixed precision
        torch.testing.assert_close(det.score_batch(model, xt.float()), s32, rtol=0, atol=0)
    rho = spearmanr(s32.numpy(), full.numpy()).statistic
    assert rho > 0.99, rho


def test_alphas_given_as_a_tuple_load_the_state_saved_with_a_list(tmp_path: Any) -> None:
    model = _glyph()
    x, y = _data(40)
    det = _det("mds_ensemble", alphas=[1, 0, 2]).fit_model(model, batches_of(x, y))
    assert det.describe()["alphas"] == [1.0, 0.0, 2.0] and "fit" in det.describe()
    assert [m.shape[1] for m in det.means_] == [4, 8]  # blocks 1 and 3
    path = det.save_state(tmp_path / "s.npz")
    loaded = _det("mds_ensemble", alphas=(1.0, 0.0, 2.0)).load_state_file(path)
    torch.testing.assert_close(loaded.score_batch(model, x[:5]), det.score_batch(model, x[:5]))
    with pytest.raises(InputError, match=r"fitted with .*asked for"):
        _det("mds_ensemble", alphas=[1.0, 0.0, 3.0]).load_state_file(path)


def test_classes_without_training_images_are_left_out() -> None:
    model = _glyph()
    x, y = _data(40)
    y = torch.where(y == 1, 2, y)  # no image of class 1 (the head has 4)
    det = _det("multi_mahalanobis").fit_model(model, batches_of(x, y))
    assert det.classes_.tolist() == [0, 2, 3] and det.means_[0].shape == (3, 4)
    assert torch.isfinite(det.score_batch(model, x[:6])).all()


# -- bad inputs -------------------------------------------------------------------------------
def test_bad_inputs() -> None:
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mds_ensemble", {"epsilon": -1}, r"^mds_ensemble: epsilon must be a number >= 0, got -1$"),
        ("mahalanobis_odin", {"epsilon": float("nan")}, r"^mahalanobis_odin: epsilon must be a "),
        ("mds_ensemble", {"alphas": []}, r"^mds_ensemble: alphas must be a non-empty list of "),
        ("multi_mahalanobis", {"alphas": [0, 0.0]}, r"^multi_mahalanobis: alphas .*not all 0"),
        ("multi_mahalanobis", {"alphas": [1, float("inf")]}, r"^multi_mahalanobis: alphas must "),
        ("multi_mahalanobis", {"alphas": [True]}, r"^multi_mahalanobis: alphas must be"),
        ("multi_mahalanobis", {"alphas": 1.0}, r"^multi_mahalanobis: alphas must be .* or None"),
        ("mahalanobis_odin", {"alphas": [1.0]}, r"^mahalanobis_odin has no hyperparameter alphas"),
    ]  # fmt: skip
    for name, bad, message in cases:
        with pytest.raises(InputError, match=message):
            _det(name, **bad)
    model = _glyph()
    x, y = _data(20)
    for name in NAMES:
        with pytest.raises(NotFittedError, match=rf"^{name}\.score_batch: fit it"):
            _det(name).score_batch(model, x)
        for labels, label in [(y + 4, 7), (y - 1, -1)]:
            with pytest.raises(InputError, match=rf"^{name}\.fit_model: label {label} outside "):
                _det(name).fit_model(model, batches_of(x, labels))
        with pytest.raises(InputError, match=rf"^{name}\.fit_model: no training image"):
            _det(name).fit_model(model, lambda: iter(()))
        det = _det(name).fit_model(model, batches_of(x, y))
        other = _glyph(widths=(6, 4, 8, 6))
        with pytest.raises(InputError, match=rf"^{name}\.score_batch: the model's features have "):
            det.score_batch(other, x)
        with pytest.raises(InputError, match=rf"^{name}\.score: {name} is a model-level detector"):
            det.score(logits=np.zeros((2, 2)))
    for name in ("mds_ensemble", "multi_mahalanobis"):
        five = _det(name, alphas=[1.0] * 5)
        message = rf"^{name}: alphas has 5 weights, model 'demo-glyphnet' has 4 blocks \(trunk\.2, "
        with pytest.raises(InputError, match=message):
            five.fit_model(model, batches_of(x, y))


def test_doctests() -> None:
    import doctest

    import semshift.detectors.class_gaussians as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
