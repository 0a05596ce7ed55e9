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

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol, Self

import numpy as np

from semshift.errors import InputError, NotFittedError

from ._base import Detector

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = [
    "MODEL_NEEDS",
    "Batches",
    "ModelLevelDetector",
    "ModelView",
    "active_dropout",
    "float32",
    "pool_layer",
]

#: What :meth:`ModelLevelDetector.fit_model` receives: a callable giving a fresh iterable of
#: ``(x, labels)`` batches of the ID training images on each call (one call per pass): ``x``
#: normalised images (n, 3, H, W) float32 on the model's device, ``labels`` int64 (n,) class
#: indices of the model's head.
Batches = Callable[[], Iterable[tuple["Tensor", "Tensor"]]]

#: What a model-level detector may need beyond the forward pass, declared in its
#: ``model_requires``: name -> what it is (used in messages and docs).
MODEL_NEEDS: dict[str, str] = {
    "grad": "gradients of the outputs with respect to the input images",
    "feature_map": "the last feature map and the layers after it (CNN adapters)",
    "dropout": "dropout layers with p > 0, switched on for stochastic forward passes",
    "layers": "the outputs of the network's main blocks (the adapter's block_names)",
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

    def block_names(self) -> tuple[str, ...]:
        """Dotted names of the network's main blocks, shallow to deep (``()`` when unknown)."""
        ...

    def layer_outputs(
        self, x: Tensor, names: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor, list[Tensor]]:
        """``(logits, features, outputs of the blocks)`` of one forward pass (in the graph)."""
        ...

    def from_feature_map(self, fmap: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits, features)`` of the forward pass finished from a feature map."""
        ...


def float32(t: Tensor) -> Tensor:
    """Half-precision results (autocast) in float32; float32 and float64 unchanged."""
    return t.float() if t.is_floating_point() and t.element_size() < 4 else t


def pool_layer(t: Tensor) -> Tensor:
    """One vector per image (n, C') of a block's output, the statistic Mahalanobis-type
    detectors read from intermediate layers: a feature map (n, C', H', W') averaged over its
    positions, tokens (n, L, D') averaged over the tokens, a matrix (n, D') as is."""
    if t.ndim == 4:
        return t.mean(dim=(2, 3))
    if t.ndim == 3:
        return t.mean(dim=1)
    return t.reshape(t.shape[0], -1)


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
    #: Whether the detector learns statistics from labelled ID training images
    #: (:meth:`fit_model`) before it can score; extraction fits it on the run's ``id_train``
    #: images (or the images given to ``semshift extract --fit-images``).
    fits: ClassVar[bool] = False
    #: The attributes holding the fitted state (each a NumPy array or a list of arrays), saved
    #: and loaded by :meth:`state` / :meth:`load_state`.
    state_names: ClassVar[tuple[str, ...]] = ()

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
        if "layers" in self.model_requires and not model.block_names():
            return (
                f"model {model.name!r} names no blocks whose outputs could be read (its adapter's "
                "block_names is empty; a HookAdapter takes them as `blocks`)"
            )
        return None

    # -- fitting on ID training images ----------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        """Whether the fitted state is present (always True for a detector that does not fit)."""
        return not self.fits or all(hasattr(self, n) for n in self.state_names)

    def fit_model(self, model: ModelView, batches: Batches, *, source: str = "") -> Self:
        """Learn the detector's statistics from labelled ID training images.

        Parameters
        ----------
        model : ModelView
            The network, in evaluation mode (the same one whose images will be scored).
        batches : Batches
            A callable giving a fresh iterable of ``(x, labels)`` batches on each call; the
            detector makes as many passes as its method needs. Gradients are enabled: a
            detector that needs none wraps its passes in ``torch.no_grad()``.
        source : str
            What the images were (their fingerprint), recorded in :meth:`describe`.

        Raises
        ------
        InputError
            A detector that does not fit, bad hyperparameters, a model lacking what the
            detector needs, or no labelled image.
        """
        if not self.fits:
            raise InputError(
                f"{self.name}: nothing to fit; its scores need only the network and the images"
            )
        self.check(model)
        self._fit_model(model, batches)
        missing = [n for n in self.state_names if not hasattr(self, n)]
        if missing:  # pragma: no cover - a detector's bug, not the user's
            raise RuntimeError(f"{self.name}: fit_model left {missing} unset")
        self.fit_source_ = str(source)
        self._device_cache: dict[Any, Any] = {}
        return self

    def state(self) -> dict[str, np.ndarray]:
        """The fitted arrays by name (a list attribute ``a`` as ``a.0``, ``a.1``, ...).

        Raises
        ------
        NotFittedError
            Before :meth:`fit_model` or :meth:`load_state`.
        """
        self._require_fitted("state")
        out: dict[str, np.ndarray] = {}
        for name in self.state_names:
            value = getattr(self, name)
            if isinstance(value, list | tuple):
                out.update({f"{name}.{i}": np.asarray(v) for i, v in enumerate(value)})
            else:
                out[name] = np.asarray(value)
        return out

    def state_digest(self) -> str:
        """SHA-256 (16 hex digits) of the hyperparameters and the fitted arrays."""
        sha = hashlib.sha256(json.dumps(self.get_params(), sort_keys=True, default=str).encode())
        for key, arr in sorted(self.state().items()):
            sha.update(key.encode())
            sha.update(str(arr.dtype).encode() + str(arr.shape).encode())
            sha.update(np.ascontiguousarray(arr).tobytes())
        return sha.hexdigest()[:16]

    def load_state(self, arrays: Mapping[str, np.ndarray], *, source: str = "") -> Self:
        """Set the fitted state from :meth:`state`'s arrays (checked: names, numeric, finite).

        Raises
        ------
        InputError
            A state array missing, not numeric, or holding NaN or infinity.
        """
        if not self.fits:
            raise InputError(f"{self.name}: has no fitted state to load")
        for name in self.state_names:
            if name in arrays:
                setattr(self, name, self._checked_state(name, arrays[name]))
                continue
            parts = sorted(
                (int(k.rsplit(".", 1)[1]), k)
                for k in arrays
                if k.startswith(name + ".") and k.rsplit(".", 1)[1].isdigit()
            )
            if not parts or [i for i, _ in parts] != list(range(len(parts))):
                raise InputError(f"{self.name}: the fitted state has no array {name!r}")
            setattr(self, name, [self._checked_state(k, arrays[k]) for _, k in parts])
        self.fit_source_ = str(source)
        self._device_cache = {}
        return self

    def _checked_state(self, key: str, arr: Any) -> np.ndarray:
        a = np.asarray(arr)
        if a.dtype.kind not in "biuf":
            raise InputError(f"{self.name}: fitted array {key!r} has dtype {a.dtype}, not numeric")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise InputError(f"{self.name}: fitted array {key!r} holds NaN or infinity")
        return a

    def save_state(self, path: str | Path) -> Path:
        """Write the fitted state to ``path`` (``.npz``: arrays, plus the hyperparameters and
        the training images' fingerprint as JSON; loaded without pickle)."""
        state = self.state()
        meta = {"name": self.name, "params": self.describe_params(),
                "source": getattr(self, "fit_source_", "")}  # fmt: skip
        state["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        path = Path(path)
        with open(path, "wb") as fh:
            np.savez(fh, **state)  # type: ignore[arg-type]
        return path

    def load_state_file(self, path: str | Path) -> Self:
        """Load a state written by :meth:`save_state` for this detector and hyperparameters.

        Raises
        ------
        InputError
            Not a state file, another detector's, or fitted with other hyperparameters.
        """
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            meta = json.loads(bytes(arrays.pop("__meta__")).decode())
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: not a fitted detector state ({exc})") from None
        if meta.get("name") != self.name:
            raise InputError(f"{path}: the state of {meta.get('name')!r}, not of {self.name!r}")
        if meta.get("params") != self.describe_params():
            raise InputError(
                f"{path}: {self.name} fitted with {meta.get('params')}, asked for "
                f"{self.describe_params()}"
            )
        return self.load_state(arrays, source=str(meta.get("source", "")))

    def describe_params(self) -> dict[str, Any]:
        """The hyperparameters as :meth:`describe` records them (without the fit)."""
        return {k: v for k, v in self.describe().items() if k not in ("name", "fit")}

    def fitted_tensor(self, name: str, like: Tensor) -> Any:
        """The fitted state ``name`` as a tensor (or list of tensors) on ``like``'s device, in
        float64 when ``like`` is float64 else float32 (integer arrays keep int64); cached."""
        import torch

        self._require_fitted("score")
        dtype = torch.float64 if like.dtype == torch.float64 else torch.float32
        cache = getattr(self, "_device_cache", None)
        if cache is None:
            cache = self._device_cache = {}
        key = (name, str(like.device), dtype)
        if key not in cache:

            def conv(a: np.ndarray) -> Tensor:
                if a.dtype.kind in "biu":
                    return torch.as_tensor(a.astype(np.int64), device=like.device)
                return torch.as_tensor(a, device=like.device).to(dtype)

            value = getattr(self, name)
            cache[key] = [conv(v) for v in value] if isinstance(value, list) else conv(value)
        return cache[key]

    def _require_fitted(self, what: str) -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"{self.name}.{what}: fit it on labelled ID training images first "
                "(fit_model; a run fits it on the id_train images, semshift extract on "
                "--fit-images)"
            )

    def _fit_model(self, model: ModelView, batches: Batches) -> None:  # pragma: no cover
        """Fit the state named in ``state_names``; see :meth:`fit_model`."""
        raise NotImplementedError

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
        self._require_fitted("score_batch")
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
        """Name and hyperparameters, as ``meta.json`` records the score column; a fitted
        detector adds ``fit``: the training images' fingerprint and its state's digest."""
        out: dict[str, Any] = {"name": self.name, **self.get_params()}
        if self.fits and self.is_fitted:
            out["fit"] = {"source": getattr(self, "fit_source_", ""),
                          "state": self.state_digest()}  # fmt: skip
        return out

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
