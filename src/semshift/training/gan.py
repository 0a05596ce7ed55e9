"""The small DCGAN of ARPL+CS: a generator of 32 x 32 images and a discriminator.

The layers are those of ``_netG32`` and ``_netD32`` (from PyTorch's DCGAN example) in the ARPL
reference code (github.com/iCGY96/ARPL, ``models/gan.py``) and in OpenOOD v1.5
(``openood/networks/arpl_net.py``), with their initialisation (convolutions ``N(0, 0.02)``,
BatchNorm scales ``N(1, 0.02)``, shifts 0); the generator's parameters load into either under
the same names (``main.*``), the discriminator's with ``classifier.*`` for their
``classifier.0.*``. Two departures, both at the outputs:

- The generator ends at its last transposed convolution, unsquashed, as OpenOOD v1.5's does
  (its ``nn.Sigmoid()`` is commented out there); ARPL's ends in ``nn.Sigmoid()``, so ARPL's
  generator is ``sigmoid(Generator32(z))`` with the same weights. Why: ARPL's loaders
  (``datasets/osr_dataloader.py``) give images through ``ToTensor()`` alone, in [0, 1], the
  range of a sigmoid; semshift, like OpenOOD, trains on images normalised with the model's
  mean and std (:class:`~semshift.training.images.TrainImages`; about [-2.1, 2.6] with
  ImageNet's statistics). Squashed into (0, 1), generated images would miss most of the
  range of every channel of the real ones, which the discriminator could tell from the pixel
  range alone and which would keep the confusing samples away from the images the classifier
  sees. (The one-to-one transfer of ARPL's design would be ``(sigmoid(G(z)) - mean) / std``;
  the OpenOOD form is kept, the one its ARPL+CS numbers come from.)
- The discriminator returns a logit: its last ``nn.Sigmoid()`` (both codes') is left to
  ``binary_cross_entropy_with_logits``, the same loss computed stably.

>>> g, d = Generator32(nz=8, ngf=4), Discriminator32(ndf=4)
>>> img = g(torch.zeros(2, 8, 1, 1))
>>> tuple(img.shape), tuple(d(img).shape)
((2, 3, 32, 32), (2,))
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

__all__ = ["Discriminator32", "Generator32", "dcgan_init"]


def dcgan_init(module: nn.Module) -> None:
    """DCGAN's initialisation of one layer (use with ``module.apply``), from the global RNG."""
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


class Generator32(nn.Module):
    """Noise ``(n, nz, 1, 1)`` -> images ``(n, nc, 32, 32)``, unbounded like normalised images
    (no output squashing: OpenOOD v1.5's ``_netG32``; ARPL's applies a sigmoid to this, see the
    module's docstring).

    Parameters
    ----------
    nz : int
        Noise dimension (100 in the reference).
    ngf : int
        Width unit of the generator (64 in the reference): 8, 4, 2 times it, then ``nc``.
    nc : int
        Image channels.
    """

    def __init__(self, nz: int = 100, ngf: int = 64, nc: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        widths = [nz, ngf * 8, ngf * 4, ngf * 2]
        for k, (cin, cout) in enumerate(itertools.pairwise(widths)):
            stride, pad = (1, 0) if k == 0 else (2, 1)
            layers += [
                nn.ConvTranspose2d(cin, cout, 4, stride, pad, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(True),
            ]
        layers.append(nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False))
        self.main = nn.Sequential(*layers)
        self.apply(dcgan_init)

    def forward(self, z: Tensor) -> Tensor:
        out: Tensor = self.main(z)
        return out


class Discriminator32(nn.Module):
    """Images ``(n, nc, H, W)`` (H, W >= 32) -> real-vs-generated logits ``(n,)`` (the reference
    ``_netD32`` gives their sigmoid).

    Parameters
    ----------
    nc : int
        Image channels.
    ndf : int
        Width unit of the discriminator (64 in the reference): 2, 4, 8, 16 times it.
    """

    def __init__(self, nc: int = 3, ndf: int = 64) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf * 2, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, ndf * 16, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(ndf * 16, 1)
        self.apply(dcgan_init)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.flatten(self.pool(self.main(x)), 1)
        out: Tensor = self.classifier(h).flatten()
        return out
