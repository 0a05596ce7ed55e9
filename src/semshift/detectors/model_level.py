"""Model-level detectors: the base class, what they may use of the network, and what they need.

A model-level detector (``level = "model"``) needs the network and the images, so it runs during
feature extraction and its scores are stored as a column named after it (``semshift extract
--score NAME``, or a run config with ``images`` sets). It is an ordinary registry entry,
defined in its own module of this package (``odin.py``, ``rankfeat.py``, ...), that

- declares its hyperparameters, paper defaults and constraints like every detector, so a
  configuration naming it is checked before any work (:func:`semshift.detectors.check_params`);
- declares what it needs of the network in ``model_requires`` (names from
  :data:`MODEL_NEEDS`: input gradients, the last feature map, dropout layers), from which the
  extraction decides whether a model can run it (:meth:`ModelLevelDetector.unavailable`) and
  the run skips it with a note when it cannot;
- computes its scores on one batch of images in ``_score_batch(model, x)``, using only what
  :class:`ModelView` names (the features layer's ``ModelAdapter`` implements it).

Extraction (:mod:`semshift.features.model_detectors`) builds such detectors from the registry
by name and calls :meth:`ModelLevelDetector.score_batch` on each batch; no other module names
a detector, so adding one touches its own module and its test. ``fit`` and ``score`` on stored
arrays refuse: there is nothing to fit, and the scores are read from the store's column.

Nothing here imports torch at module import time (torch is an optional dependency); the
detectors import it inside their methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol

from semshift.errors import InputError

from ._base import Detector

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["MODEL_NEEDS", "ModelLevelDetector", "ModelView", "active_dropout", "float32"]

#: What a model-level detector may need beyond the forward pass, declared in its
#: ``model_requires``: name -> what it is (used in messages and docs).
MODEL_NEEDS: dict[str, str] = {
    "grad": "gradients of the outputs with respect to the input images",
    "feature_map": "the last feature map and the layers after it (CNN adapters)",
    "dropout": "dropout layers with p > 0, switched on for stochastic forward passes",
}


class ModelView(Protocol):
    """What a model-level detector may use of the network (``ModelAdapter`` implements it).

    The images ``x`` a detector receives are normalised with ``mean`` and ``std`` (per channel,
    ``(pixel - mean) / std`` with pixels in [0, 1]); a step of ``e`` in pixel units is ``e /
    std`` on ``x``. The network is in evaluation mode; a detector that changes a module's mode
    restores it.
    """

    @property
    def name(self) -> str:
        """The model's name (for messages)."""
        ...

    @property
    def mean(self) -> tuple[float, float, float]:
        """Per-channel mean of the input normalisation."""
        ...

    @property
    def std(self) -> tuple[float, float, float]:
        """Per-channel standard deviation of the input normalisation."""
        ...

    @property
    def has_feature_map(self) -> bool:
        """Whether :meth:`feature_map` and :meth:`from_feature_map` are available."""
        ...

    @property
    def module(self) -> nn.Module:
        """The wrapped network (to find its dropout layers; call the methods below to run it)."""
        ...

    def __call__(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits (n, C), penultimate features (n, D))`` of normalised images x."""
        ...

    def features(self, x: Tensor) -> Tensor:
        """Penultimate features h (n, D) of normalised images x."""
        ...

    def head(self, h: Tensor) -> Tensor:
        """Logits ``h W^T + b`` (n, C) of features h."""
        ...

    def feature_map(self, x: Tensor) -> Tensor:
        """The last block's feature map (n, C', H', W') (only when ``has_feature_map``)."""
        ...

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits, features)`` of the forward pass finished from a feature map."""
        ...


def float32(t: Tensor) -> Tensor:
    """Half-precision results (autocast) in float32; float32 and float64 unchanged."""
    return t.float() if t.is_floating_point() and t.element_size() < 4 else t


def active_dropout(module: nn.Module) -> list[nn.Module]:
    """The ``torch.nn`` dropout layers of ``module`` with a drop probability p > 0.

    Dropout, Dropout1d/2d/3d, AlphaDropout and FeatureAlphaDropout modules; functional dropout
    inside a ``forward`` and stochastic depth (timm's ``DropPath``) are not layers this finds.
    """
    from torch import nn

    kinds = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
             nn.FeatureAlphaDropout)  # fmt: skip
    return [m for m in module.modules() if isinstance(m, kinds) and float(m.p) > 0]


class ModelLevelDetector(Detector):
    """Base class of a detector computed during feature extraction (``level = "model"``).

    Subclasses set ``name``, take their hyperparameters as keyword arguments of ``__init__``
    (stored unchanged) with ``_parameter_constraints``, declare ``model_requires`` and implement
    ``_score_batch(model, x)``. Register them with
    :func:`~semshift.detectors.register_detector`.

    Attributes
    ----------
    model_requires : frozenset of str
        What the computation needs of the network beyond its forward pass (names from
        :data:`MODEL_NEEDS`); checked on each model by :meth:`unavailable`.
    needs_grad : bool
        ``"grad" in model_requires``: the computation back-propagates to the input images.
    needs_feature_map : bool
        ``"feature_map" in model_requires``: the last feature map (CNN adapters only).
    """

    level = "model"
    model_requires: ClassVar[frozenset[str]] = frozenset()
    needs_grad: ClassVar[bool] = False
    needs_feature_map: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(cls.model_requires) - MODEL_NEEDS.keys())
        if unknown:
            raise TypeError(
                f"{cls.__name__}: model_requires names {unknown}, not among {sorted(MODEL_NEEDS)}"
            )
        cls.model_requires = frozenset(cls.model_requires)
        cls.needs_grad = "grad" in cls.model_requires
        cls.needs_feature_map = "feature_map" in cls.model_requires

    # -- what the extraction calls -----------------------------------------------------------
    def unavailable(self, model: ModelView) -> str | None:
        """Why ``model`` cannot provide what this detector needs, or None when it can.

        Read from ``model_requires``; the run records the reason as a note and leaves the
        detector out for that model.
        """
        if "feature_map" in self.model_requires and not model.has_feature_map:
            return f"model {model.name!r} exposes no feature map (CNN adapters only)"
        if "dropout" in self.model_requires and not active_dropout(model.module):
            return (
                f"model {model.name!r} has no dropout layer with p > 0 (torch.nn Dropout "
                "modules) to sample from"
            )
        return None

    def check(self, model: ModelView) -> None:
        """Check the hyperparameters and that ``model`` provides what this detector needs.

        Raises
        ------
        InputError
            A hyperparameter outside its constraints, or the model lacks something the
            detector declares in ``model_requires`` (the message says what).
        """
        self._check_params()
        reason = self.unavailable(model)
        if reason is not None:
            raise InputError(f"{self.name}: {reason}")

    def score_batch(self, model: ModelView, x: Tensor) -> Tensor:
        """Normality scores of a batch of images: higher = more in-distribution.

        Parameters
        ----------
        model : ModelView
            The network (a ``semshift.features.models.ModelAdapter``), in evaluation mode, on
            the device of ``x``.
        x : Tensor (n, channels, H, W), floating point
            Images normalised with ``model.mean`` and ``model.std``. May be called under
            ``torch.inference_mode`` and autocast: a detector that needs gradients or full
            precision sets them up itself.

        Returns
        -------
        Tensor (n,)
            On the device of ``x``; float32, or float64 for a float64 model and input.

        Raises
        ------
        InputError
            Bad hyperparameters, a model without what the detector needs, or ``x`` not a 4-D
            floating-point tensor.
        """
        self.check(model)
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) != 4 or not (hasattr(x, "is_floating_point") and x.is_floating_point()):
            what = f"{getattr(x, 'dtype', type(x).__name__)} of shape {shape}"
            raise InputError(
                f"{self.name}.score_batch: x must be a floating-point tensor (n, channels, H, W) "
                f"of normalised images, got {what}"
            )
        scores = self._score_batch(model, x)
        if tuple(scores.shape) != (shape[0],):
            raise RuntimeError(  # pragma: no cover - a detector's bug, not the user's
                f"{self.name}: scores of shape {tuple(scores.shape)} for {shape[0]} images"
            )
        return scores

    def describe(self) -> dict[str, Any]:
        """Name and hyperparameters, as ``meta.json`` records the score column."""
        return {"name": self.name, **self.get_params()}

    # -- hooks ------------------------------------------------------------------------------
    def _score_batch(self, model: ModelView, x: Tensor) -> Tensor:  # pragma: no cover
        """Scores (n,) of checked inputs; see :meth:`score_batch`."""
        raise NotImplementedError

    # -- stored arrays: refused ---------------------------------------------------------------
    def _refuse(self, what: str) -> NoReturn:
        raise InputError(
            f"{self.name}.{what}: {self.name} is a model-level detector, computed during feature "
            f"extraction with the network and the images (semshift extract --score {self.name}, "
            f"or a run config with 'images' sets); read its scores from the store's "
            f"{self.name!r} score column"
        )

    def fit(self, **inputs: Any) -> NoReturn:
        """Refuse: a model-level detector runs during feature extraction.

        Raises
        ------
        InputError
            Always.
        """
        self._refuse("fit")

    def score(self, **inputs: Any) -> NoReturn:
        """Refuse: a model-level detector runs during feature extraction.

        Raises
        ------
        InputError
            Always.
        """
        self._refuse("score")
