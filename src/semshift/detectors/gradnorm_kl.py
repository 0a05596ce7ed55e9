"""GradNorm through the network: L1 norm of the gradient of the KL divergence to the uniform
distribution with respect to the network's parameters (pytorch-ood's ``GradNorm``)."""

from __future__ import annotations

import functools
import re
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar

from semshift.errors import InputError

from ._params import Constraint, Interval, ParamConstraints
from ._registry import register_detector
from .model_level import ModelLevelDetector, ModelView, float32

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["GradNormKL", "RegexPattern", "selected_parameters"]

#: Images whose per-sample gradients are held at once (pytorch-ood's ``micro_batch_size``):
#: memory grows as this times the number of selected parameters; the scores do not depend on it.
CHUNK = 32


class RegexPattern(Constraint):
    """A string that compiles as a Python regular expression."""

    def is_satisfied_by(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        try:
            re.compile(value)
        except re.error:
            return False
        return True

    def __str__(self) -> str:
        return "a regular expression (str)"

    def examples_outside(self) -> list[object]:
        return ["(", "[a-", 1, ["fc"], b"fc"]


def selected_parameters(module: nn.Module, pattern: str | None) -> list[str]:
    """Names of ``module``'s parameters that ``pattern`` matches in full (all when None), in
    ``named_parameters`` order.

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> selected_parameters(net, r"2\\..*"), len(selected_parameters(net, None))
    (['2.weight', '2.bias'], 4)
    """
    names = [n for n, _ in module.named_parameters()]
    if pattern is None:
        return names
    rx = re.compile(pattern)
    return [n for n in names if rx.fullmatch(n)]


@functools.cache
def _logits_module_class() -> type:
    """The class of :func:`_logits_module`'s modules (built once; torch is imported lazily)."""
    from torch import nn

    class AdapterLogits(nn.Module):
        def __init__(self, view: ModelView) -> None:
            super().__init__()
            self.net = view.module  # the only child: its parameters are "net.<name>"
            self.view = view

        def forward(self, x: Tensor) -> Tensor:
            return self.view(x)[0]

    return AdapterLogits


def _logits_module(view: ModelView) -> nn.Module:
    """The adapter's logits as a module whose only child is the adapter's network, so that
    ``torch.func.functional_call`` swaps parameters into the network the adapter runs."""
    module: nn.Module = _logits_module_class()(view)
    return module


@register_detector
class GradNormKL(ModelLevelDetector):
    """GradNorm through the network: ``|| d KL(u || softmax(f(x) / T)) / d w ||_1`` over the
    selected parameters w of the network; higher = more in-distribution.

    u is the uniform distribution over the C classes; ``KL(u || p) = -log C - (1/C) sum_c log
    p_c``, so its gradient is that of pytorch-ood's cross-entropy to u. The per-sample
    gradients are taken by back-propagating through the whole network (``torch.func.vmap`` of
    ``torch.func.grad``, in chunks of images), with respect to every parameter by default
    (pytorch-ood 0.4.0's ``GradNorm`` without ``param_filter``, whose scores are minus these).

    How it differs from the array-level ``gradnorm``: that one is the paper's choice of w (the
    head's weight only), computed in closed form from the stored features and logits, and
    uses the loss ``sum_c -log p_c`` (C times the KL's gradient) at T = 1. With ``parameters``
    naming the head's weight (``"fc\\.weight"`` on a torchvision ResNet) and T = 1, ``C
    gradnorm_kl = gradnorm``. Model-level: it needs the network's parameters and a backward
    pass per image. Computed in float32 even under autocast; float64 models and inputs stay
    float64.

    Parameters
    ----------
    temperature : float, default 1
        T, > 0 (the paper's and pytorch-ood's default).
    parameters : str or None, default None
        Regular expression matched in full against the names of the network's parameters
        (``named_parameters`` of the adapter's module, e.g. ``"fc\\.weight"`` or
        ``"layer4\\..*"``); None takes them all (pytorch-ood's default). Must match at least
        one parameter of the scored model.

    References
    ----------
    .. [1] R. Huang, A. Geng and Y. Li, "On the Importance of Gradients for Detecting
       Distributional Shifts in the Wild", NeurIPS 2021.
    .. [2] pytorch-ood 0.4.0, ``pytorch_ood.detector.GradNorm``.
    """

    name = "gradnorm_kl"
    model_requires = frozenset({"grad"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "parameters": [RegexPattern(), None],
    }

    def __init__(self, *, temperature: float = 1.0, parameters: str | None = None) -> None:
        self.temperature = temperature
        self.parameters = parameters

    def describe(self) -> dict[str, Any]:
        """Name and hyperparameters, the temperature as a float (``1`` and ``1.0`` agree)."""
        return {"name": self.name, "temperature": float(self.temperature),
                "parameters": self.parameters}  # fmt: skip

    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        import torch
        from torch.func import functional_call, grad, vmap

        module = model.module
        names = set(selected_parameters(module, self.parameters))
        if not names:
            shown = [n for n, _ in module.named_parameters()]
            listing = ", ".join(repr(n) for n in shown[:8]) + (", ..." if len(shown) > 8 else "")
            raise InputError(
                f"{self.name}: parameters must be a regular expression matching some of the "
                f"parameter names of model {model.name!r} ({listing}); {self.parameters!r} "
                "matches none"
            )
        t = float(self.temperature)
        wrapper = _logits_module(model)
        params = {f"net.{n}": p.detach() for n, p in module.named_parameters()}
        selected = {k: v for k, v in params.items() if k[4:] in names}
        fixed = {k: v for k, v in params.items() if k[4:] not in names}
        fixed.update({f"net.{n}": b.detach() for n, b in module.named_buffers()})

        def loss(chosen: dict[str, Tensor], xi: Tensor) -> Tensor:
            # functional_call swaps the parameters into the module that the adapter runs
            logits = functional_call(wrapper, {**chosen, **fixed}, (xi.unsqueeze(0),))
            return -(float32(logits) / t).log_softmax(dim=1).mean()

        per_image = vmap(grad(loss), in_dims=(None, 0))
        out = []
        with (
            torch.autocast(x.device.type, enabled=False),
            torch.inference_mode(False),
            torch.enable_grad(),
        ):
            x = float32(x).detach().clone()
            for lo in range(0, x.shape[0], CHUNK):
                grads = per_image(selected, x[lo : lo + CHUNK])
                out.append(sum(g.abs().flatten(1).sum(dim=1) for g in grads.values()))
        return torch.cat(out).detach()
