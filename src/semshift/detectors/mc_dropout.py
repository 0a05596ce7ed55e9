"""MC Dropout: the predictive distribution of several forward passes with dropout switched on."""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING, ClassVar

from ._params import Interval, ParamConstraints, StrOptions
from ._registry import register_detector
from .model_level import ModelLevelDetector, ModelView, active_dropout, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["MCDropout"]


@register_detector
class MCDropout(ModelLevelDetector):
    """Monte Carlo dropout: ``max_c mean_t softmax(f_t(x))_c`` over T stochastic passes.

    The network's dropout layers are switched on and the images are passed ``samples`` times;
    with ``mode="mean"`` the score is the largest class probability of the mean softmax (the
    predictive distribution of Gal and Ghahramani), with ``mode="var"`` it is minus the
    per-class variance of the softmax over the passes (Bessel-corrected), averaged over the
    classes. Higher = more in-distribution in both modes (pytorch-ood's ``MCD`` returns minus
    these). Model-level: needs dropout layers with p > 0; a model without them is refused
    (``semshift extract``) or left out with a note (a run).

    Determinism: the masks are drawn from torch's generator of the images' device, seeded with
    ``seed`` at the start of each batch and restored afterwards (the caller's random state is
    untouched). The same images in the same batches give the same scores; a sample's masks
    depend on its position in its batch, so the scores depend on the batch size (extraction's
    batches are fixed by the store's shard and batch sizes).

    Departures from pytorch-ood 0.4.0 (``MCD``, whose ``samples=30`` is the default here):
    its default mode is ``"var"``, here ``"mean"`` (the paper's predictive mean, and what
    OpenOOD's dropout postprocessor thresholds); it puts the whole network in training mode
    but BatchNorm, here only the ``torch.nn`` dropout layers are switched on (as OpenOOD's
    ``enable_dropout``), so stochastic depth or any other layer that behaves differently in
    training stays in evaluation mode (the same scores on a network whose only such layers
    are dropout and BatchNorm). OpenOOD's version also adds dropout (p = 0.5) to the
    penultimate features of networks trained without it; here only the network's own dropout
    is used.

    Parameters
    ----------
    samples : int, default 30
        Number T of stochastic forward passes, >= 2.
    mode : {"mean", "var"}, default "mean"
        Score from the mean softmax (``max_c``) or from its variance (minus the mean over
        classes).
    seed : int, default 0
        Seed of the dropout masks, in [0, 2^32 - 1].

    References
    ----------
    .. [1] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian Approximation: Representing Model
       Uncertainty in Deep Learning", ICML 2016.
    """

    name = "mc_dropout"
    model_requires = frozenset({"dropout"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "samples": [Interval(Integral, 2, None, closed="left")],
        "mode": [StrOptions(("mean", "var"))],
        "seed": [Interval(Integral, 0, 2**32 - 1, closed="both")],
    }

    def __init__(self, *, samples: int = 30, mode: str = "mean", seed: int = 0) -> None:
        self.samples = samples
        self.mode = mode
        self.seed = seed

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        seed = int(self.seed)
        if x.device.type == "cuda":  # seed (and restore) only the generator dropout draws from
            index = x.device.index if x.device.index is not None else torch.cuda.current_device()
            fork = torch.random.fork_rng(devices=[index])
            reseed = torch.cuda.default_generators[index].manual_seed
        elif x.device.type == "cpu":
            fork = torch.random.fork_rng(devices=[])
            reseed = torch.random.default_generator.manual_seed
        else:  # another accelerator: seeded through torch.manual_seed, its state not restored
            fork = torch.random.fork_rng(devices=[])
            reseed = torch.manual_seed
        layers = active_dropout(model.module)
        was_training = [m.training for m in layers]
        try:
            for m in layers:
                m.train()
            with fork, torch.no_grad():
                reseed(seed)
                probs = [
                    torch.softmax(float32(model(x)[0]), dim=1) for _ in range(int(self.samples))
                ]
        finally:
            for m, training in zip(layers, was_training, strict=True):
                m.train(training)
        if self.mode == "var":
            return -torch.stack(probs).var(dim=0).mean(dim=1)
        mean = torch.zeros_like(probs[0])
        for p in probs:  # summed in pass order, as pytorch-ood's run_mean
            mean += p
        mean /= len(probs)
        return mean.max(dim=1).values
