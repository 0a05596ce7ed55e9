"""ARPL+CS's DCGAN against ports of the reference definitions (``_netG32`` / ``_netD32`` of
ARPL's ``models/gan.py`` and OpenOOD v1.5's ``openood/networks/arpl_net.py``): with the same
weights OpenOOD's generator is ours, ARPL's is its sigmoid, and both discriminators are the
sigmoid of ours."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semshift.training.gan import Discriminator32, Generator32


class _RefG32(nn.Module):
    """``_netG32``'s layers; ``sigmoid=True`` is ARPL's, False OpenOOD v1.5's (commented out)."""

    def __init__(self, nz: int, ngf: int, nc: int, sigmoid: bool) -> None:
        super().__init__()
        layers = [
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
        ]
        self.main = nn.Sequential(*layers, *([nn.Sigmoid()] if sigmoid else []))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.main(z)


class _RefD32(nn.Module):
    """``_netD32`` of both codes: a sigmoid after the last convolution and after the linear."""

    def __init__(self, nc: int, ndf: int) -> None:
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
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Linear(ndf * 16, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.flatten(self.avgpool(self.main(x)), 1)
        return self.classifier(out).flatten()


@pytest.mark.parametrize("train", [False, True])
def test_generator_is_openoods_and_arpls_is_its_sigmoid(train: bool) -> None:
    torch.manual_seed(0)
    ours = Generator32(nz=8, ngf=4).double().train(train)
    z = torch.randn(6, 8, 1, 1, dtype=torch.float64)
    want = ours(z)
    for sigmoid in (False, True):
        ref = _RefG32(8, 4, 3, sigmoid).double().train(train)
        ref.load_state_dict(ours.state_dict())  # strict: the same layers under the same names
        got = ref(z)
        torch.testing.assert_close(got, torch.sigmoid(want) if sigmoid else want)
    # ours is not confined to the sigmoid's (0, 1): normalised images are not either
    assert float(want.detach().min()) < 0.0


def test_discriminator_gives_the_logit_of_the_reference_output() -> None:
    torch.manual_seed(1)
    ours = Discriminator32(3, ndf=4).double().eval()
    state = {k.replace("classifier.", "classifier.0."): v for k, v in ours.state_dict().items()}
    ref = _RefD32(3, 4).double().eval()
    ref.load_state_dict(state)
    x = torch.randn(5, 3, 32, 32, dtype=torch.float64)
    torch.testing.assert_close(ref(x), torch.sigmoid(ours(x)))


def test_initialisation_is_dcgans() -> None:
    torch.manual_seed(2)
    g = Generator32(nz=16, ngf=16).requires_grad_(False)
    conv = torch.cat([m.weight.flatten() for m in g.modules() if isinstance(m, nn.ConvTranspose2d)])
    bn = [m for m in g.modules() if isinstance(m, nn.BatchNorm2d)]
    assert abs(float(conv.std()) - 0.02) < 0.002 and abs(float(conv.mean())) < 0.002
    scales = torch.cat([m.weight for m in bn])
    assert abs(float(scales.mean()) - 1.0) < 0.01 and all(
        float(m.bias.abs().max()) == 0 for m in bn
    )
