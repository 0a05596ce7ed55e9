"""Model-level detectors, computed during extraction (they need the network and the images).

Each returns a normality score per image (higher = more in-distribution) and is stored in the
feature store as a 1-D float32 array named after it (a score column: ``store.arrays("odin")``).

- ``odin`` (Liang et al. 2018): input perturbation against the predicted class, then the
  temperature-scaled maximum softmax.
- ``rankfeat`` (Song et al. 2022): remove the rank-1 component of the last block's feature map,
  finish the forward pass, Energy.

They are declared in the detector registry (:mod:`semshift.detectors.model_level`,
``list_detectors(level="model")``): name, hyperparameters, paper defaults and constraints live
there, once; this module holds the torch computation of each declaration.
:data:`MODEL_DETECTORS` maps the names to these implementations and
:func:`get_model_detector` builds one (keyword overrides checked by
:func:`semshift.detectors.check_params`).

References
----------
Liang, S., Li, Y. and Srikant, R. (2018). Enhancing the reliability of out-of-distribution image
detection in neural networks. ICLR.

Song, Y., Sebe, N. and Wang, W. (2022). RankFeat: rank-1 feature removal for out-of-distribution
detection. NeurIPS.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

import torch
from torch import Tensor

import semshift.detectors.model_level as declared
from semshift.detectors import check_params, list_detectors
from semshift.errors import InputError, UnknownNameError
from semshift.features.models import ModelAdapter

__all__ = ["MODEL_DETECTORS", "ModelDetector", "Odin", "RankFeat", "get_model_detector"]


def _f32(t: Tensor) -> Tensor:
    """Half-precision results (autocast) in float32; float32/float64 unchanged."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


class ModelDetector:
    """A detector that needs the network: ``score(adapter, x) -> (n,)`` normality scores.

    Subclasses set ``declaration``, the registered :class:`~semshift.detectors.ModelLevelDetector`
    they compute, and implement :meth:`score`; ``name``, ``needs_grad`` and
    ``needs_feature_map`` are copied from it. ``__init__`` takes the declaration's keyword
    hyperparameters, checks them (:func:`semshift.detectors.check_params`) and fills the
    others with the declared defaults.

    Raises
    ------
    InputError
        (construction) A hyperparameter the declaration does not have or does not accept.
    """

    declaration: ClassVar[type[declared.ModelLevelDetector]]
    name: ClassVar[str]
    needs_feature_map: ClassVar[bool] = False
    needs_grad: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        decl = getattr(cls, "declaration", None)
        if not (isinstance(decl, type) and issubclass(decl, declared.ModelLevelDetector)):
            raise TypeError(
                f"{cls.__name__}: set `declaration` to the registered model-level detector it "
                f"computes (a semshift.detectors.ModelLevelDetector subclass), got {decl!r}"
            )
        cls.name = decl.name
        cls.needs_grad, cls.needs_feature_map = decl.needs_grad, decl.needs_feature_map

    def __init__(self, **params: Any) -> None:
        check_params(self.name, params)
        #: Every hyperparameter, the declared defaults filled in.
        self.params: dict[str, Any] = self.declaration(**params).get_params()

    def score(self, adapter: ModelAdapter, x: Tensor) -> Tensor:
        """Scores (n,) of normalised images x (n, 3, H, W); higher = more in-distribution."""
        raise NotImplementedError

    def get_params(self) -> dict[str, Any]:
        """Hyperparameters, for ``meta.json``."""
        return dict(self.params)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.get_params()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


class Odin(ModelDetector):
    """ODIN: x' = x - eps sign(grad_x [-log softmax(f(x)/T)_yhat]); score max softmax(f(x')/T).

    The perturbation is taken in pixel units, as in the original code and OpenOOD: on normalised
    inputs each channel's step is ``eps / std_c``. The hyperparameters ``temperature`` (T) and
    ``epsilon``, their defaults and accepted values are those declared by
    :class:`semshift.detectors.model_level.Odin`; they are stored as floats.
    """

    declaration = declared.Odin

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # floats in meta.json whatever the config's YAML gave (1000 or 1000.0)
        self.params = {k: float(v) for k, v in self.params.items()}
        self.temperature, self.epsilon = self.params["temperature"], self.params["epsilon"]

    def score(self, adapter: ModelAdapter, x: Tensor) -> Tensor:
        t = self.temperature
        # float32 even under CUDA autocast: at T = 1000 the signal is in the 5th digit of the
        # logits, below float16 resolution
        with (
            torch.autocast(x.device.type, enabled=False),
            torch.inference_mode(False),
            torch.enable_grad(),
        ):
            x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
            xg = x.detach().clone().requires_grad_(True)
            logits = _f32(adapter(xg)[0]) / t
            yhat = logits.argmax(dim=1)
            loss = torch.nn.functional.cross_entropy(logits, yhat, reduction="sum")
            (grad,) = torch.autograd.grad(loss, xg)
        step = torch.sign(grad.detach())
        std = torch.tensor(adapter.std, dtype=step.dtype, device=step.device).view(1, -1, 1, 1)
        x2 = x.detach() - self.epsilon * step / std
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            out = _f32(adapter(x2)[0]) / t
        return torch.softmax(out, dim=1).max(dim=1).values


def rank1_component(flat: Tensor) -> Tensor:
    """The best rank-1 approximation ``s1 u1 v1^T`` of each matrix of a batch.

    Parameters
    ----------
    flat : Tensor (n, C, K)
        A batch of matrices (RankFeat: feature maps with K = H W).

    Returns
    -------
    Tensor (n, C, K), dtype of ``flat``
        ``s1 u1 v1^T`` of every matrix, equal to the truncated SVD's term (it is unique up to
        the sign of ``u1`` and ``v1``, which cancels; when ``s1 = s2`` any top singular pair is a
        valid answer, as with the SVD). Computed as ``M v1 v1^T`` with ``v1`` the top
        eigenvector of ``M^T M`` (or ``u1 u1^T M`` from ``M M^T``, whichever is smaller), in
        float64 so that squaring the matrix costs no precision that matters.
    """
    m = flat.double()
    if m.shape[2] <= m.shape[1]:
        _, vecs = torch.linalg.eigh(m.transpose(1, 2) @ m)  # ascending eigenvalues
        v = vecs[:, :, -1:]
        out = (m @ v) @ v.transpose(1, 2)
    else:
        _, vecs = torch.linalg.eigh(m @ m.transpose(1, 2))
        u = vecs[:, :, -1:]
        out = u @ (u.transpose(1, 2) @ m)
    return out.to(flat.dtype)


class RankFeat(ModelDetector):
    """RankFeat: subtract s1 u1 v1^T from each sample's (C, HW) last feature map, then Energy.

    The remaining map is pooled and passed through the head as in the normal forward pass;
    score = logsumexp(logits) (Energy, T = 1). The rank-1 term is exact, as the authors' SVD
    (not their power-iteration approximation), but computed from the top eigenvector of the
    smaller Gram matrix (HW x HW or C x C) in float64 (:func:`rank1_component`), which is an
    order of magnitude faster than a batched ``torch.linalg.svd`` on the CPU.
    """

    declaration = declared.RankFeat

    def score(self, adapter: ModelAdapter, x: Tensor) -> Tensor:
        if not adapter.has_feature_map:
            raise InputError(
                f"rankfeat needs the last feature map, which model {adapter.name!r} does not "
                "expose (CNN adapters only)"
            )
        with torch.no_grad():
            fmap = _f32(adapter.feature_map(x))
            n, c, h, w = fmap.shape
            flat = fmap.reshape(n, c, h * w)
            rank1 = rank1_component(flat)
            logits = _f32(adapter.from_feature_map((flat - rank1).reshape(n, c, h, w))[0])
        return torch.logsumexp(logits, dim=1)


#: Name -> implementation of each model-level detector; the names are those of the
#: declarations, ``list_detectors(level="model")``.
MODEL_DETECTORS: dict[str, type[ModelDetector]] = {impl.name: impl for impl in (Odin, RankFeat)}


def get_model_detector(name: str, **params: Any) -> ModelDetector:
    """Build a model-level detector by name with its declared defaults (``params`` override).

    Parameters
    ----------
    name : str
        A name from ``semshift.detectors.list_detectors(level="model")``.
    **params
        Hyperparameters, checked by :func:`semshift.detectors.check_params`.

    Raises
    ------
    UnknownNameError
        Unknown name (close matches and the known model-level names are listed).
    InputError
        A post-hoc detector's name, or a hyperparameter the detector does not have or does
        not accept.
    """
    known = list_detectors(level="model")
    if name not in MODEL_DETECTORS:
        if name in list_detectors(level="post_hoc"):
            raise InputError(
                f"{name!r} is a post-hoc detector (fitted and scored on stored features, e.g. "
                f"by semshift evaluate), not a model-level one; model-level: {', '.join(known)}"
            )
        close = difflib.get_close_matches(str(name), known, n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownNameError(
            f"unknown model-level detector {name!r}{hint}; known: {', '.join(known)}"
        )
    return MODEL_DETECTORS[name](**params)
