"""ARPL+CS: ARPL with confusing samples from a GAN trained alongside (Chen et al., TPAMI 2021)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import torch
from torch import Tensor, nn

from semshift.features.models import ModelAdapter
from semshift.params import Constraint, Interval
from semshift.training.distributed import (
    average_gradients,
    global_count,
    shard_slice,
)
from semshift.training.gan import Discriminator32, Generator32

from ._base import register_method
from .arpl import ARPL, _running_stats_kept


@register_method
class ARPLConfusingSamples(ARPL):
    """ARPL+CS: ARPL with confusing samples from a small GAN trained alongside the classifier.

    Each step, with images x (n), noise z ~ N(0, 1) (n, nz, 1, 1) and G, D a DCGAN generator
    and discriminator (:mod:`semshift.training.gan`):

    1. D takes an Adam step on ``BCE(D(x), 1) + BCE(D(G(z)), 0)``;
    2. G takes an Adam step on ``BCE(D(G(z)), 1) + beta * S(h(G(z)))``;
    3. the classifier and the reciprocal points take the loop's step on
       ``ARPL(x, y) + beta * S(h(G(z')))`` with fresh noise z',

    where h is the classifier's feature and the confusion ``S(h) = exp(mean_i sum_k p_ik log
    p_ik)``, ``p_i = softmax_k(||h_i - P_k||^2 / D)``, is smallest (1 / C) when a sample is
    equally far from every reciprocal point: the generator learns to make samples near the
    known classes' boundary that the classifier is taught not to claim.

    Data parallelism (:mod:`.distributed`): every process draws the noise of the whole global
    batch and generates its slice; G's and D's BatchNorm layers normalise over the global
    batch; the BCE means and the mean inside ``S`` are global-batch means
    (:meth:`~TrainingMethod.batch_mean`); G's and D's gradients are averaged over the processes
    before their Adam steps (they are not in DistributedDataParallel, whose one backward per
    forward does not fit three updates per step). The updates, the random state and the
    checkpoint are then those of one process, within floating-point tolerance.

    Parameters
    ----------
    weight_pl, temperature : float
        As :class:`ARPL` (0.1, 1).
    beta : float
        ``beta`` >= 0, weight of the confusion term in both G's and the classifier's loss;
        default 0.1 (OpenOOD v1.5's ``loss.beta``, the reference code's).
    gan_lr : float
        Adam learning rate of G and D (betas 0.5, 0.999); default 0.0002 (OpenOOD v1.5).
    nz : int
        Noise dimension; default 100.
    ngf, ndf : int
        Width units of G and D; default 64 (OpenOOD v1.5's ``arpl_gan`` network). They cost
        about ``2e4 * ngf^2`` and ``2e4 * ndf^2`` multiply-adds per image (70 M each at 64):
        small beside a ResNet, not beside the 4 M of the demo's GlyphNet, whose runs use 8.

    Notes
    -----
    Departures from the reference code (OpenOOD v1.5 ``ARPLGANTrainer``):

    - The reference classifier has two BatchNorm sets (ResNet-ABN), one for real and one for
      generated images. Here the model is a plain registry model: generated images pass the
      same BatchNorm layers, normalised with their own batch statistics (as the second set
      would be in training) but without updating the running statistics, so the exported model
      is the model plain ARPL gives; the BatchNorm scales and shifts are shared.
    - G's step computes only G's gradients and the classifier's step does not backpropagate
      into G (the reference accumulates gradients there that the next step discards): the same
      updates, less work.
    - The classifier, the points and the radius follow the loop's recipe (SGD, cosine
      schedule), not OpenOOD's Nesterov SGD with a per-step cosine; G and D use the reference's
      Adam. Generated 32 x 32 images are resized (bilinear) to a larger model input.
    - The noise is drawn from the run's seeded CPU generator, so a run is reproducible and
      resumable.

    The trained model exports like :class:`ARPL` (points in the head; score with the ``arpl``
    detector); G and D are kept in the checkpoint, not in ``model.safetensors``.

    References
    ----------
    .. [1] Chen, Peng, Wang, Tian. "Adversarial Reciprocal Points Learning for Open Set
       Recognition." IEEE TPAMI 2021.
    .. [2] Radford, Metz, Chintala. "Unsupervised Representation Learning with Deep
       Convolutional Generative Adversarial Networks." ICLR 2016.
    """

    name = "arpl_cs"
    _parameter_constraints: ClassVar[dict[str, list[Constraint | None]]] = {
        "weight_pl": [Interval(Real, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, None, closed="left")],
        "gan_lr": [Interval(Real, 0, None, closed="neither")],
        "nz": [Interval(Integral, 1, None, closed="left")],
        "ngf": [Interval(Integral, 1, None, closed="left")],
        "ndf": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        weight_pl: float = 0.1,
        temperature: float = 1.0,
        beta: float = 0.1,
        gan_lr: float = 0.0002,
        nz: int = 100,
        ngf: int = 64,
        ndf: int = 64,
    ) -> None:
        super().__init__(weight_pl=weight_pl, temperature=temperature)
        self.beta, self.gan_lr = beta, gan_lr
        self.nz, self.ngf, self.ndf = nz, ngf, ndf

    def setup(self, num_classes: int, feature_dim: int) -> None:
        super().setup(num_classes, feature_dim)
        self.generator = Generator32(int(self.nz), int(self.ngf))
        self.discriminator = Discriminator32(3, int(self.ndf))
        betas = (0.5, 0.999)
        self._opts = {
            "generator": torch.optim.Adam(self.generator.parameters(), self.gan_lr, betas=betas),
            "discriminator": torch.optim.Adam(
                self.discriminator.parameters(), self.gan_lr, betas=betas
            ),
        }

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return dict(self._opts)

    @staticmethod
    def neg_entropy(h: Tensor, points: Tensor) -> Tensor:
        """``sum_k p_ik log p_ik`` (n,), ``p_i = softmax(||h_i - P_k||^2 / D)``, of features h
        (n, D) and points P (C, D): minus the entropy of each sample's distance softmax."""
        d2 = (h[:, None, :] - points[None, :, :]).pow(2).mean(2)
        logp = torch.log_softmax(d2, dim=1)
        return (logp.exp() * logp).sum(1)

    @classmethod
    def confusion(cls, h: Tensor, points: Tensor) -> Tensor:
        """``exp(mean_i sum_k p_ik log p_ik)``, ``p_i = softmax(||h_i - P_k||^2 / D)``.

        In ``[1 / C, 1]``; ``1 / C`` when each sample is equally far from all C points.
        """
        return cls.neg_entropy(h, points).mean().exp()

    def _confusion(self, h: Tensor) -> Tensor:
        """:meth:`confusion` with the mean over the global batch."""
        return self.batch_mean(self.neg_entropy(h, self.points.float())).exp()

    def _noise(self, n: int, like: Tensor) -> Tensor:
        """Noise (n, nz, 1, 1) for this process's n images: the whole global batch's is drawn
        (the same random state in every process) and this process's slice kept."""
        if self._group is None:
            return torch.randn(n, int(self.nz), 1, 1).to(like.device)
        dist = torch.distributed
        n_all = global_count(n, self._group, like.device)
        rows = shard_slice(n_all, dist.get_rank(self._group), dist.get_world_size(self._group))
        if rows.stop - rows.start != n:
            raise RuntimeError(f"a slice of {n} images is not this process's share of {n_all}")
        return torch.randn(n_all, int(self.nz), 1, 1)[rows].to(like.device)

    def _step_own(self, name: str, loss: Tensor, part: nn.Module) -> None:
        """Backpropagate ``loss`` into ``part`` only and take ``part``'s own Adam step."""
        opt = self._opts[name]
        opt.zero_grad(set_to_none=True)
        params = list(part.parameters())
        loss.backward(inputs=params)
        if self._group is not None:
            average_gradients(params, self._group)
        opt.step()

    def _fake_features(self, adapter: ModelAdapter, fake: Tensor, size: tuple[int, int]) -> Tensor:
        if tuple(fake.shape[-2:]) != size:
            fake = nn.functional.interpolate(fake, size=size, mode="bilinear", align_corners=False)
        with _running_stats_kept(adapter.module):
            return adapter.features(fake).float()

    def batch_loss(
        self, adapter: ModelAdapter, x: Tensor, labels: Tensor, outliers: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        n, size = len(x), (int(x.shape[-2]), int(x.shape[-1]))
        g, d = self.generator, self.discriminator
        ones, zeros = torch.ones(n, device=x.device), torch.zeros(n, device=x.device)

        def bce(logits: Tensor, target: Tensor) -> Tensor:
            each = nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
            return self.batch_mean(each)

        with torch.autocast(x.device.type, enabled=False):
            fake = g(self._noise(n, x))
            # (1) the discriminator: real vs generated
            real_in = x.float()
            if tuple(real_in.shape[-2:]) != (32, 32):
                real_in = nn.functional.interpolate(real_in, size=(32, 32), mode="bilinear")
            err_d = bce(d(real_in), ones) + bce(d(fake.detach()), zeros)
            self._step_own("discriminator", err_d, d)
            # (2) the generator: fool D, and confuse the classifier
            err_g = bce(d(fake), ones)
            err_g = err_g + float(self.beta) * self._confusion(
                self._fake_features(adapter, fake, size)
            )
            self._step_own("generator", err_g, g)
            with torch.no_grad():
                fake2 = g(self._noise(n, x))
        # (3) the classifier: ARPL on x, confusion on fresh generated samples (a global-batch
        # mean inside S; the loop's share scaling keeps the averaged gradient that of the
        # global batch's loss, since the all-reduce's backward sums the processes' shares)
        logits, feats = self(adapter, x)
        loss = self.loss(logits, feats, labels, None)
        cs = self._confusion(self._fake_features(adapter, fake2, size))
        return loss + float(self.beta) * cs, logits
