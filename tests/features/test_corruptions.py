"""ImageNet-C corruptions: determinism, severity order, known values, extraction with groups."""

from __future__ import annotations

import colorsys
import itertools

import numpy as np
import pytest
from PIL import Image

from semshift.errors import InputError, UnknownNameError
from semshift.features import concat_stores
from semshift.features.corruptions import (
    CORRUPTIONS,
    Corruption,
    _disk,
    corrupt,
    hsv2rgb,
    list_corruptions,
    rgb2hsv,
)

NOISY = ("gaussian_noise", "shot_noise", "impulse_noise")


@pytest.fixture(scope="module")
def img():
    """A smooth colourful 64 x 64 image with some texture."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:64, 0:64] / 63
    base = np.stack([xx, yy, 0.5 + 0.3 * np.sin(6 * xx)], -1) * 200 + 20
    return np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8)


def _dist(a, b):
    return float(np.abs(a.astype(float) - b.astype(float)).mean())


def test_names():
    assert list_corruptions() == [
        "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "gaussian_blur",
        "contrast", "brightness", "saturate", "jpeg", "pixelate",
    ]  # fmt: skip
    with pytest.raises(UnknownNameError, match=r"unknown corruption 'gaussian_nois' \(did you"):
        corrupt(np.zeros((4, 4, 3), np.uint8), "gaussian_nois", 1)
    with pytest.raises(InputError, match="severity must be 1, 2, 3, 4 or 5, got 6"):
        Corruption("contrast", 6)
    with pytest.raises(InputError, match=r"expected an \(H, W, 3\) uint8 array"):
        corrupt(np.zeros((4, 4), np.uint8), "contrast", 1)


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_shape_dtype_and_determinism(img, name):
    a = corrupt(img, name, 3, seed=7, index=2)
    assert a.shape == img.shape and a.dtype == np.uint8
    np.testing.assert_array_equal(a, corrupt(img, name, 3, seed=7, index=2))
    pil = corrupt(Image.fromarray(img), name, 3, seed=7, index=2)
    assert isinstance(pil, Image.Image) and pil.size == (64, 64) and pil.mode == "RGB"
    np.testing.assert_array_equal(np.asarray(pil), a)
    other_seed = corrupt(img, name, 3, seed=8, index=2)
    other_index = corrupt(img, name, 3, seed=7, index=3)
    if name in NOISY:  # random: the seed and the sample index change the draws
        assert not np.array_equal(a, other_seed) and not np.array_equal(a, other_index)
    else:  # deterministic transforms ignore them
        np.testing.assert_array_equal(a, other_seed)


@pytest.mark.parametrize("name", [n for n in CORRUPTIONS if n != "saturate"])
def test_distance_grows_with_severity(img, name):
    d = [_dist(corrupt(img, name, s, seed=1), img) for s in range(1, 6)]
    assert all(b > a for a, b in itertools.pairwise(d)), d
    assert d[0] > 0


def test_saturate_follows_its_table(img):
    """Severities 1-2 desaturate (x0.3, x0.1), 3-5 saturate (x2, x5 + .1, x20 + .1)."""
    s0 = rgb2hsv(img / 255.0)[..., 1]
    means = []
    for sev, (a, b) in zip(
        range(1, 6), [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.1)], strict=True
    ):
        s = rgb2hsv(corrupt(img, "saturate", sev) / 255.0)[..., 1]
        np.testing.assert_allclose(s, np.clip(s0 * a + b, 0, 1), atol=0.03)
        means.append(s.mean())
    assert means[1] < means[0] < s0.mean() < means[2] < means[3] < means[4]


def test_known_values():
    grey = np.full((128, 128, 3), 128, np.uint8)
    # gaussian noise: residual std = sigma (no clipping around mid-grey)
    for sev, sigma in zip(range(1, 6), (0.08, 0.12, 0.18, 0.26, 0.38), strict=True):
        r = corrupt(grey, "gaussian_noise", sev).astype(float) / 255 - 128 / 255
        if sev <= 3:
            assert r.std() == pytest.approx(sigma, rel=0.03)
    # shot noise: Poisson(x lam) / lam has mean x and variance x / lam
    r = corrupt(grey, "shot_noise", 1).astype(float) / 255
    assert r.mean() == pytest.approx(128 / 255, abs=0.005)
    assert r.var() == pytest.approx(128 / 255 / 60, rel=0.05)
    # impulse noise: a fraction `amount` of values set to 0 or 255, half each
    r = corrupt(grey, "impulse_noise", 5)
    assert (r == 0).mean() == pytest.approx(0.135, abs=0.01)
    assert (r == 255).mean() == pytest.approx(0.135, abs=0.01)
    # blurs and contrast keep a constant image constant; contrast keeps the channel means
    for name in ("defocus_blur", "gaussian_blur", "contrast", "pixelate"):
        np.testing.assert_array_equal(corrupt(grey, name, 3), grey)
        if name != "defocus_blur":
            np.testing.assert_array_equal(corrupt(grey, name, 5), grey)
    # ... except the reference's defocus kernels of radius 8 and 10, which sum to > 1
    assert _disk(8, 0.5).sum() == pytest.approx(1.01298, abs=1e-5)
    assert _disk(10, 0.5).sum() == pytest.approx(1.01079, abs=1e-5)
    np.testing.assert_array_equal(corrupt(grey, "defocus_blur", 5), np.rint(128 * 1.01079))
    rng = np.random.default_rng(0)
    x = rng.integers(60, 200, (32, 32, 3)).astype(np.uint8)
    c = corrupt(x, "contrast", 2).astype(float)
    np.testing.assert_allclose(c.mean((0, 1)), x.mean((0, 1)), atol=0.6)
    assert c.std() == pytest.approx(0.3 * x.astype(float).std(), rel=0.02)
    # pixelate at severity 5 (scale .25): 4 x 4 blocks on a 32-pixel image are constant
    p = corrupt(x, "pixelate", 5)
    np.testing.assert_array_equal(p[:4, :4], np.broadcast_to(p[0, 0], (4, 4, 3)))
    # HSV conversions agree with colorsys
    f = rng.random((6, 6, 3))
    want = np.array([[colorsys.rgb_to_hsv(*px) for px in row] for row in f])
    np.testing.assert_allclose(rgb2hsv(f), want, atol=1e-12)
    np.testing.assert_allclose(hsv2rgb(want), f, atol=1e-12)


def test_corrupted_copy_in_store_groups(tmp_path, images):
    import torch

    from semshift.features.data import ImageDataset, image_folder
    from semshift.features.extract import extract
    from semshift.features.models import load_model

    model = load_model("timm/test_resnet", random_init=True, num_classes=3)
    src = image_folder(images)
    kw = {"preset": "resize36-crop32", "shard_size": 6, "progress": False, "fsync": False}
    extract(model, src, tmp_path / "clean", groups={"split": "id_test"}, **kw)
    blur = Corruption("gaussian_noise", 4, seed=3)
    extract(model, src, tmp_path / "noise4", groups={"split": "id_test"}, corruption=blur, **kw)
    both = concat_stores([tmp_path / "clean", tmp_path / "noise4"])
    sel = both.select(corruption="gaussian_noise", severity=4)
    assert len(sel) == len(src) and both.index["corruption"].isna().sum() == len(src)
    ds = ImageDataset(src, "resize36-crop32", model.mean, model.std, blur)
    with torch.no_grad():
        want = model(torch.stack([ds[i][0] for i in range(len(ds))]))[1].numpy()
    np.testing.assert_allclose(sel.arrays("features")[0], want, rtol=1e-4, atol=1e-5)
    clean = both.select(split="id_test", source=str(tmp_path / "clean")).arrays("features")[0]
    assert np.abs(clean - want).max() > 1e-3  # the corruption changed the features
    assert both.meta["corruption"] is None
    assert concat_stores([tmp_path / "noise4"]).meta["corruption"]["severity"] == 4


def test_cli_corruption(tmp_path, images, capsys):
    from semshift.cli import main
    from semshift.features import open_store

    args = ["extract", "--model", "timm/test_resnet", "--random-init", "--data", str(images),
            "--preset", "resize36-crop32", "--workers", "0", "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "s"), "--corruption", "jpeg", "--severity", "2"])
    assert exc.value.code == 0
    st = open_store(tmp_path / "s")
    assert set(st.index["corruption"]) == {"jpeg"} and set(st.index["severity"]) == {2}
    assert st.meta["corruption"]["name"] == "jpeg"
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "t"), "--corruption", "fog"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("error: unknown corruption 'fog'")
