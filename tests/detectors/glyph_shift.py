"""A small trained CNN and shifted images for the direction tests of the model-level detectors
that learn from ID training images (gram, nac).

Three ID classes of 32 x 32 images, each a sinusoidal grating of its own orientation under
Gaussian pixel noise; a GlyphNet with small widths trained on them for a few seconds on the
CPU. The shifted images are gratings of an unseen orientation and frequency (new classes)
under twice the noise (a covariate shift on top).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from semshift.demo.model import GlyphNet, GlyphNetAdapter

ANGLES = (0.0, np.pi / 3, 2 * np.pi / 3)


def gratings(n: int, angle: float, *, freq: float = 0.5, noise: float = 0.3,
             seed: int = 0) -> torch.Tensor:  # fmt: skip
    """(n, 3, 32, 32) float32 gratings ``sin(freq (x cos a + y sin a) + phase)`` plus noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float64)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    img = np.sin(freq * (xx * np.cos(angle) + yy * np.sin(angle))[None] + phase)
    img = img[:, None] + noise * rng.normal(size=(n, 3, 32, 32))
    return torch.from_numpy(img.astype(np.float32))


def id_images(n_per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ID images and their labels, the classes interleaved."""
    xs = [gratings(n_per_class, a, seed=seed + 7 * k) for k, a in enumerate(ANGLES)]
    x = torch.stack(xs, dim=1).reshape(-1, 3, 32, 32)
    y = torch.arange(len(ANGLES)).repeat(n_per_class)
    return x, y


def shifted_images(n: int, seed: int) -> torch.Tensor:
    """Gratings of an unseen orientation and frequency under twice the noise."""
    return gratings(n, np.pi / 6, freq=1.3, noise=0.6, seed=seed)


@functools.lru_cache(maxsize=2)
def trained_glyph(seed: int = 0) -> GlyphNetAdapter:
    """GlyphNet (widths 8, 8, 16, 16) trained 40 steps on the ID classes (float32, eval mode;
    one per seed and process, shared by the tests: do not change it)."""
    torch.manual_seed(seed)
    net = GlyphNet(len(ANGLES), widths=(8, 8, 16, 16))
    x, y = id_images(60, seed=seed + 100)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed)
    net.train()
    for _ in range(40):
        idx = torch.randint(0, len(x), (32,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()
    return GlyphNetAdapter(net.eval())


def batches_of(x: torch.Tensor, y: torch.Tensor, size: int = 32) -> Any:
    """A ``fit_model`` batches callable over fixed tensors."""

    def batches() -> Any:
        for lo in range(0, len(x), size):
            yield x[lo : lo + size], y[lo : lo + size]

    return batches
