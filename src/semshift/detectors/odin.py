"""ODIN: temperature-scaled maximum softmax of an input perturbed toward its prediction."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar

from ._params import Interval, ParamConstraints
from ._registry import register_detector
from .model_level import ModelLevelDetector, ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["Odin"]


@register_detector
class Odin(ModelLevelDetector):
    """ODIN score ``max_c softmax(f(x') / T)_c`` of a perturbed input; higher = more ID.

    ``x' = x - epsilon sign(grad_x [-log softmax(f(x) / T)_yhat])`` with yhat the predicted
    class. Model-level: computed during feature extraction (it back-propagates to the images).

    The perturbation is taken in pixel units, as in the original code and OpenOOD: on
    normalised inputs each channel's step is ``epsilon / std_c``. The gradient and both forward
    passes run in float32 even under autocast (at T = 1000 the signal lies in the 5th digit of
    the logits, below float16 resolution); float64 models and inputs stay float64.

    Parameters
    ----------
    temperature : float, default 1000
        T, > 0 (the paper's and OpenOOD's ImageNet setting).
    epsilon : float, default 0.0014
        Perturbation size in [0, 1] pixel units, >= 0 (0 gives the temperature-scaled MSP).

    References
    ----------
    .. [1] S. Liang, Y. Li and R. Srikant, "Enhancing the Reliability of Out-of-distribution
       Image Detection in Neural Networks", ICLR 2018.
    """

    name = "odin"
    model_requires = frozenset({"grad"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, temperature: float = 1000.0, epsilon: float = 0.0014) -> None:
        self.temperature = temperature
        self.epsilon = epsilon

    def describe(self) -> dict[str, Any]:
        """Name and hyperparameters as floats (``1000`` and ``1000.0`` from a config agree)."""
        return {"name": self.name, "temperature": float(self.temperature),
                "epsilon": float(self.epsilon)}  # fmt: skip

    def _direction(self, grad: Tensor) -> Tensor:
        """Where each input element moves (times ``epsilon / std``): ``sign(grad)``."""
        import torch

        return torch.sign(grad)

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch

        t, eps = float(self.temperature), float(self.epsilon)
        with (
            torch.autocast(x.device.type, enabled=False),
            torch.inference_mode(False),
            torch.enable_grad(),
        ):
            x = float32(x)
            xg = x.detach().clone().requires_grad_(True)
            logits = float32(model(xg)[0]) / t
            yhat = logits.argmax(dim=1)
            loss = torch.nn.functional.cross_entropy(logits, yhat, reduction="sum")
            (grad,) = torch.autograd.grad(loss, xg)
        step = self._direction(grad.detach())
        std = torch.tensor(model.std, dtype=step.dtype, device=step.device).view(1, -1, 1, 1)
        x2 = x.detach() - eps * step / std
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            out = float32(model(x2)[0]) / t
        return torch.softmax(out, dim=1).max(dim=1).values
