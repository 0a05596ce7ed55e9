"""ViM and its residual-only variant: norm of the feature outside the principal subspace."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import cache
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import scipy.linalg
from threadpoolctl import ThreadpoolController

from semshift.errors import InputError

from ._base import Detector, Float64Array, Inputs
from ._common import F32, F64, f32, moment_about, prepare_head, row_blocks, sgemm
from ._params import Interval, ParamConstraints, SearchSpace
from ._registry import register_detector
from ._shared import digest
from .logit import shared_energy

__all__ = ["Residual", "ViM", "default_vim_dim"]


def default_vim_dim(n_features: int) -> int:
    """Principal-space dimension when ``dim=None``.

    The ViM paper uses 1000 for D = 2048 and 512 for D = 768; we apply 1000 for D >= 2048,
    512 for 768 <= D < 2048, and D // 2 for narrower features (our extension).
    """
    if n_features >= 2048:
        return 1000
    if n_features >= 768:
        return 512
    return n_features // 2


@cache
def _blas() -> ThreadpoolController:
    """One controller for the process (``threadpool_limits`` scans the libraries per call)."""
    return ThreadpoolController()


class _PrincipalResidual(Detector):
    """Shared fit: origin u = -pinv(W) b and the null space NS of the features around u."""

    _beside: Any

    fit_requires = frozenset({"features", "head"})
    fit_group = "principal_subspace"
    # dim < D is checked in fit, where D is known
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "dim": [Interval(Integral, 1, None, closed="left"), None]
    }
    #: the D-dependent default first, then fixed dimensions (dim >= D fails in fit)
    search_space: ClassVar[SearchSpace] = {"dim": (None, 64, 128, 256, 512, 1000)}

    def __init__(self, *, dim: int | None = None) -> None:
        self.dim = dim

    def _fit(self, inputs: Inputs) -> None:
        x = inputs.get("features")
        w, b = inputs.head
        d = int(x.shape[1])
        dim = default_vim_dim(d) if self.dim is None else int(self.dim)
        if not 0 < dim < d:
            raise InputError(
                f"{self.name}.fit: principal dimension dim = {dim} must lie in [1, D) with "
                f"feature dimension D = {d}"
            )

        def subspace() -> tuple[F64, F32]:
            # The SVD of pinv and the eigendecomposition on one BLAS thread: their level-2
            # steps gain little from a second thread and stall for seconds when the other core
            # is busy (measured on 2 shared cores: eigh of 512 x 512 in 0.04 s on one thread,
            # 0.7-4 s on two); the scatter matrix, a level-3 product, keeps every thread.
            with _blas().limit(limits=1, user_api="blas"):
                origin = -np.linalg.pinv(np.asarray(w, dtype=np.float64)) @ np.asarray(
                    b, dtype=np.float64
                )
            # EmpiricalCovariance(assume_centered=True) of h - u, as the public code (which
            # ran it in the features' float32): float32 products of mean-centred rows summed
            # in float64 chunks; the subspace turns by the matrix's rounding error over the
            # eigenvalue gap at the cut, so rounding is kept relative to the centred spread
            second_moment = moment_about(x, origin) / x.shape[0]
            # the other core meanwhile does what the subclass needs beside (vim: the training
            # logits), also on one thread
            with _blas().limit(limits=1, user_api="blas"), ThreadPoolExecutor(1) as pool:
                beside = pool.submit(self._beside_eigh, inputs)
                # divide and conquer: faster than the default (MRRR) driver for every vector
                # (float64: in float32 the eigenvectors alone move scores by 2e-4 of their
                # scale, pytorch-ood's error)
                _, vecs = scipy.linalg.eigh(second_moment, driver="evd")  # ascending
                self._beside = beside.result()
            return origin, f32(vecs[:, : d - dim])  # all but the top `dim` eigenvectors

        # vim and residual with the same dim, fitted together (fit_many), compute it once
        self._beside = None
        self.origin_, self.null_space_ = inputs.share(("principal_subspace", dim), subspace)
        self.dim_ = dim
        self._share_token = digest(self.origin_, self.null_space_)

    def _beside_eigh(self, inputs: Inputs) -> Any:
        """Work of the subclass's fit that needs no subspace, run during the
        eigendecomposition (its result is ``self._beside``, None when the subspace came from
        another detector's fit)."""
        return None

    def shared_residual(self, inputs: Inputs) -> F64:
        """:meth:`residual` of the score inputs, shared by vim and residual fitted alike."""
        return inputs.share(
            ("vim_residual", self._share_token), lambda: self.residual(inputs.get("features"))
        )

    def residual(self, h: np.ndarray) -> F64:
        """``||(h - u) NS||`` for features (n, D) -> float64 (n,), in float32 blocks.

        ``h - u`` and the projection are float32; the squares are summed in float64.
        """
        origin32 = self.origin_.astype(np.float32)
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 8 * h.shape[1] + 8 * self.null_space_.shape[1]):
            proj = sgemm(f32(h[sl]) - origin32, self.null_space_)
            out[sl] = np.sqrt(np.einsum("ij,ij->i", proj, proj, dtype=np.float64))
        return out


@register_detector
class ViM(_PrincipalResidual):
    """Virtual-logit matching ``logsumexp(z) - alpha ||(h - u) NS||``; higher = more ID.

    u = -pinv(W) b; NS spans the eigenvectors of the (uncentred) second moment of ``h - u``
    after the top ``dim``; alpha = mean over training samples of max z divided by the mean
    training residual (training logits from the head, as the public code).

    Parameters
    ----------
    dim : int or None, default None
        Principal-space dimension; None applies :func:`default_vim_dim` (1000 for D = 2048,
        512 for D = 768, as the paper).

    Attributes
    ----------
    origin_ : float64 array (D,)
        u.
    null_space_ : float32 array (D, D - dim)
        NS.
    alpha_ : float
        Scale of the virtual logit.

    References
    ----------
    .. [1] H. Wang, Z. Li, L. Feng and W. Zhang, "ViM: Out-Of-Distribution with Virtual-logit
       Matching", CVPR 2022.
    """

    name = "vim"
    score_requires = frozenset({"features", "logits"})

    def _beside_eigh(self, inputs: Inputs) -> float:
        """Mean over the training samples of the largest logit ``max_c (W h + b)_c``."""
        x = inputs.get("features")
        w32, b = prepare_head(*inputs.head)
        w_t = np.ascontiguousarray(w32.T)  # (D, C), once: sgemm takes C-contiguous operands
        total = 0.0
        for sl in row_blocks(x.shape[0], 4 * x.shape[1] + 12 * w32.shape[0]):
            z = sgemm(x[sl], w_t)
            total += float((z + b).max(axis=1).sum())
        return total / x.shape[0]

    def _fit(self, inputs: Inputs) -> None:
        super()._fit(inputs)
        mean_max_logit = self._beside if self._beside is not None else self._beside_eigh(inputs)
        x = inputs.get("features")
        mean_residual = float(self.residual(x).sum()) / x.shape[0]
        if mean_residual <= 0.0:
            raise InputError(
                "vim.fit: the training features have no component outside the principal "
                f"subspace of dimension {self.dim_}; lower dim"
            )
        self.alpha_ = mean_max_logit / mean_residual

    def _score(self, inputs: Inputs) -> Float64Array:
        return shared_energy(inputs) - self.alpha_ * self.shared_residual(inputs)


@register_detector
class Residual(_PrincipalResidual):
    """Residual score ``-||(h - u) NS||`` (ViM without the logits); higher = more ID.

    Parameters
    ----------
    dim : int or None, default None
        Principal-space dimension; None applies :func:`default_vim_dim`.

    References
    ----------
    .. [1] H. Wang, Z. Li, L. Feng and W. Zhang, "ViM: Out-Of-Distribution with Virtual-logit
       Matching", CVPR 2022 (the "Residual" baseline).
    """

    name = "residual"
    score_requires = frozenset({"features"})

    def _score(self, inputs: Inputs) -> Float64Array:
        return -self.shared_residual(inputs)
