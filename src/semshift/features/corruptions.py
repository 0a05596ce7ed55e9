"""ImageNet-C style corruptions: deterministic, seeded, five severities (covariate shift).

Each corruption follows the parameter table of Hendrycks & Dietterich's ``make_imagenet_c.py``
(the public code behind the paper), re-implemented with NumPy, SciPy and PIL (no OpenCV or
scikit-image):

==============  ==========================================================  =====================
name            severity 1 .. 5                                             operation
==============  ==========================================================  =====================
gaussian_noise  sigma .08 .12 .18 .26 .38                                   x + N(0, sigma^2)
shot_noise      lambda 60 25 12 5 3                                         Poisson(x lambda) / l
impulse_noise   amount .03 .06 .09 .17 .27                                  salt & pepper
defocus_blur    (radius, alias) (3,.1) (4,.5) (6,.5) (8,.5) (10,.5)         disk kernel
gaussian_blur   sigma 1 2 3 4 6                                             Gaussian filter
contrast        c .4 .3 .2 .1 .05                                           (x - mean) c + mean
brightness      c .1 .2 .3 .4 .5                                            HSV value + c
saturate        (a, b) (.3,0) (.1,0) (2,0) (5,.1) (20,.1)                   HSV saturation a s + b
jpeg            quality 25 18 15 10 7                                       JPEG round trip
pixelate        scale .6 .5 .4 .3 .25                                       box down/up sampling
==============  ==========================================================  =====================

Differences from the reference code, all deliberate: randomness comes from a NumPy
``Generator`` seeded by ``(seed, sample index, corruption)`` instead of the global RNG, so a
corrupted set is reproducible and independent of worker order; the image size is the input's
(the reference assumed 224 x 224, which is what the ``imagenet`` preset produces); the outputs
are rounded to uint8 (the reference truncated with ``np.uint8(...)``, which turns an untouched
100 into 99) and are not re-encoded as JPEG. Kept from the reference: the defocus kernels of
radius 8 and 10 touch the edge of their grid, so the anti-aliasing blur (reflect-101 border, as in
OpenCV) makes them sum to 1.013 and 1.011: severities 4 and 5 also brighten slightly.

References
----------
Hendrycks, D. and Dietterich, T. (2019). Benchmarking neural network robustness to common
corruptions and perturbations. ICLR.

>>> import numpy as np
>>> from semshift.features.corruptions import corrupt
>>> img = np.full((8, 8, 3), 100, np.uint8)
>>> corrupt(img, "contrast", 5)[0, 0].tolist()  # a constant image has no contrast to lose
[100, 100, 100]
>>> corrupt(img, "brightness", 1)[0, 0].tolist()  # HSV value 100/255 + 0.1 = 125.5/255
[126, 126, 126]
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, UnknownNameError

__all__ = ["CORRUPTIONS", "SEVERITIES", "Corruption", "corrupt", "list_corruptions"]

F64 = NDArray[np.float64]
SEVERITIES = (1, 2, 3, 4, 5)


def _gaussian_noise(x: F64, s: int, rng: np.random.Generator) -> F64:
    c = (0.08, 0.12, 0.18, 0.26, 0.38)[s - 1]
    return np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1)


def _shot_noise(x: F64, s: int, rng: np.random.Generator) -> F64:
    c = (60, 25, 12, 5, 3)[s - 1]
    return np.clip(rng.poisson(x * c) / c, 0, 1)


def _impulse_noise(x: F64, s: int, rng: np.random.Generator) -> F64:
    # skimage.util.random_noise(mode="s&p", amount=c): each value becomes 0 or 1 with prob. c
    c = (0.03, 0.06, 0.09, 0.17, 0.27)[s - 1]
    hit = rng.random(x.shape) < c
    salt = rng.random(x.shape) < 0.5
    out = x.copy()
    out[hit & salt] = 1.0
    out[hit & ~salt] = 0.0
    return out


def _gauss_1d(ksize: int, sigma: float) -> F64:
    """OpenCV's ``getGaussianKernel`` (for sigma > 0)."""
    r = np.arange(ksize) - (ksize - 1) / 2
    k = np.exp(-(r**2) / (2 * sigma**2))
    return np.asarray(k / k.sum(), np.float64)


def _disk(radius: int, alias_blur: float) -> F64:
    """The reference ``disk``: an aliased disk, normalised, then a small Gaussian blur."""
    if radius <= 8:
        grid, ksize = np.arange(-8, 9), 3
    else:
        grid, ksize = np.arange(-radius, radius + 1), 5
    xx, yy = np.meshgrid(grid, grid)
    disk = ((xx**2 + yy**2) <= radius**2).astype(np.float64)
    disk /= disk.sum()
    from scipy import ndimage  # here: listing the corruptions imports no SciPy

    g = _gauss_1d(ksize, alias_blur)
    # cv2.GaussianBlur with BORDER_REFLECT_101 == scipy "mirror"
    disk = ndimage.correlate1d(disk, g, axis=0, mode="mirror")
    return np.asarray(ndimage.correlate1d(disk, g, axis=1, mode="mirror"), np.float64)


def _defocus_blur(x: F64, s: int, rng: np.random.Generator) -> F64:
    radius, alias = ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5))[s - 1]
    from scipy import ndimage

    k = _disk(radius, alias)
    out = np.stack(
        [ndimage.correlate(x[..., ch], k, mode="mirror") for ch in range(x.shape[2])], axis=-1
    )  # cv2.filter2D: correlation, BORDER_REFLECT_101
    return np.clip(out, 0, 1)


def _gaussian_blur(x: F64, s: int, rng: np.random.Generator) -> F64:
    from scipy import ndimage

    c = (1, 2, 3, 4, 6)[s - 1]
    # skimage.filters.gaussian(multichannel=True): sigma per spatial axis, mode "nearest"
    out = ndimage.gaussian_filter(x, sigma=(c, c, 0), mode="nearest", truncate=4.0)
    return np.clip(out, 0, 1)


def _contrast(x: F64, s: int, rng: np.random.Generator) -> F64:
    c = (0.4, 0.3, 0.2, 0.1, 0.05)[s - 1]
    means = x.mean(axis=(0, 1), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1)


def rgb2hsv(rgb: F64) -> F64:
    """RGB in [0, 1] -> HSV in [0, 1] (scikit-image's ``rgb2hsv``)."""
    v = rgb.max(axis=-1)
    delta = np.ptp(rgb, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(delta == 0, 0.0, delta / np.where(v == 0, 1, v))
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        safe = np.where(delta == 0, 1, delta)
        h = np.where(
            r == v, (g - b) / safe, np.where(g == v, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe)
        )
    h = np.where(delta == 0, 0.0, (h / 6.0) % 1.0)
    return np.stack([h, s, v], axis=-1)


def hsv2rgb(hsv: F64) -> F64:
    """HSV in [0, 1] -> RGB in [0, 1] (scikit-image's ``hsv2rgb``)."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    hi = np.floor(h * 6)
    f = h * 6 - hi
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    hi = hi.astype(np.int64) % 6
    choices = [
        np.stack(c, axis=-1)
        for c in ((v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q))
    ]
    return np.choose(hi[..., None], choices)


def _brightness(x: F64, s: int, rng: np.random.Generator) -> F64:
    c = (0.1, 0.2, 0.3, 0.4, 0.5)[s - 1]
    hsv = rgb2hsv(x)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return np.clip(hsv2rgb(hsv), 0, 1)


def _saturate(x: F64, s: int, rng: np.random.Generator) -> F64:
    a, b = ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.1))[s - 1]
    hsv = rgb2hsv(x)
    hsv[..., 1] = np.clip(hsv[..., 1] * a + b, 0, 1)
    return np.clip(hsv2rgb(hsv), 0, 1)


def _jpeg(img: Any, s: int) -> Any:
    from PIL import Image

    quality = (25, 18, 15, 10, 7)[s - 1]
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    buf.seek(0)
    with Image.open(buf) as out:
        return out.convert("RGB")


def _pixelate(img: Any, s: int) -> Any:
    from PIL import Image

    c = (0.6, 0.5, 0.4, 0.3, 0.25)[s - 1]
    w, h = img.size
    small = img.resize((max(1, int(w * c)), max(1, int(h * c))), Image.Resampling.BOX)
    return small.resize((w, h), Image.Resampling.BOX)


_ArrayFn = Callable[[F64, int, np.random.Generator], F64]
#: Corruptions on float arrays (H, W, 3) in [0, 1].
_ARRAY: dict[str, _ArrayFn] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "defocus_blur": _defocus_blur,
    "gaussian_blur": _gaussian_blur,
    "contrast": _contrast,
    "brightness": _brightness,
    "saturate": _saturate,
}
#: Corruptions on PIL images.
_PIL: dict[str, Callable[[Any, int], Any]] = {"jpeg": _jpeg, "pixelate": _pixelate}
#: Every corruption name, in the order of the table above.
CORRUPTIONS: tuple[str, ...] = (*_ARRAY, *_PIL)


def list_corruptions() -> list[str]:
    """Names of the corruptions."""
    return list(CORRUPTIONS)


def _check(name: str, severity: int) -> None:
    if name not in CORRUPTIONS:
        from semshift.errors import did_you_mean

        raise UnknownNameError(
            f"unknown corruption {name!r}{did_you_mean(name, CORRUPTIONS, n=3)}; known: "
            f"{', '.join(CORRUPTIONS)}"
        )
    if severity not in SEVERITIES:
        raise InputError(f"corruption severity must be 1, 2, 3, 4 or 5, got {severity!r}")


def _rng(seed: int, index: int, name: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(index), zlib.crc32(name.encode())])


def corrupt(image: Any, name: str, severity: int, *, seed: int = 0, index: int = 0) -> Any:
    """Apply corruption ``name`` at ``severity`` (1-5) to one image.

    Parameters
    ----------
    image : PIL.Image or array (H, W, 3) uint8
        RGB image.
    name : str
        One of :data:`CORRUPTIONS`.
    severity : int
        1 (mild) to 5 (strong).
    seed, index : int
        The random draws depend only on ``(seed, index, name)`` (not on severity, so severities
        of one image share their noise pattern).

    Returns
    -------
    Same kind as ``image``: a PIL RGB image or a uint8 array (H, W, 3).

    Raises
    ------
    UnknownNameError
        Unknown corruption (the known ones are listed).
    InputError
        Severity outside 1-5, or an array that is not (H, W, 3) uint8.
    """
    from PIL import Image

    _check(name, severity)
    is_array = isinstance(image, np.ndarray)
    if is_array:
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise InputError(
                f"corrupt(): expected an (H, W, 3) uint8 array, got {image.dtype} {image.shape}"
            )
        pil = Image.fromarray(image)
    else:
        pil = image.convert("RGB")
    if name in _PIL:
        out_pil = _PIL[name](pil, severity)
        return np.asarray(out_pil, np.uint8) if is_array else out_pil
    x = np.asarray(pil, np.float64) / 255.0
    y = _ARRAY[name](x, severity, _rng(seed, index, name))
    arr = np.rint(np.clip(y, 0, 1) * 255).astype(np.uint8)
    return arr if is_array else Image.fromarray(arr)


class Corruption:
    """A corruption at one severity, as a per-sample transform ``(pil_image, index) -> image``.

    Pass it to :func:`semshift.features.extract.extract` (``corruption=``); the store then
    records ``corruption`` and ``severity`` as group columns.

    Parameters
    ----------
    name : str
        One of :data:`CORRUPTIONS`.
    severity : int
        1-5.
    seed : int
        Base seed; sample ``i`` uses ``(seed, i, name)``.
    """

    def __init__(self, name: str, severity: int, *, seed: int = 0) -> None:
        _check(name, severity)
        self.name, self.severity, self.seed = name, int(severity), int(seed)

    def __call__(self, image: Any, index: int = 0) -> Any:
        return corrupt(image, self.name, self.severity, seed=self.seed, index=index)

    def describe(self) -> dict[str, Any]:
        """For ``meta.json``."""
        return {
            "name": self.name,
            "severity": self.severity,
            "seed": self.seed,
            "reference": "Hendrycks & Dietterich 2019, make_imagenet_c.py parameters",
        }

    def __repr__(self) -> str:
        return f"Corruption({self.name!r}, severity={self.severity}, seed={self.seed})"
