"""GrOOD: nearest training gradient of a prototype loss with respect to an OOD prototype."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from semshift.errors import InputError

from ._base import Float64Array, Inputs
from ._common import F32, F64, class_sums, row_blocks
from ._params import Interval, ParamConstraints, SearchSpace, StrOptions
from ._registry import register_detector
from ._scan import TrainRows, kth_largest, scan_request, scan_scores, train_rows
from ._search import BACKENDS, InnerProductIndex, SearchDetector, resolve_backend
from ._shared import Request, digest

__all__ = ["GrOOD"]

#: The noise (OOD) prototypes (docs/methods.md#grood): the mean of the class prototypes, or the
#: mean feature of validation OOD samples (``val_ood_features``, OpenOOD v1.5's configuration).
NOISE_PROTOTYPES = ("proto_mean", "val_ood")


@register_detector
class GrOOD(SearchDetector):
    """GrOOD score ``-||g(h) - g_(k)||^2``; higher = more in-distribution.

    Prototypes: mu_c, the mean training feature of class c (by label), and an OOD ("noise")
    prototype m. The nearest-class-prototype loss of a feature h is the cross-entropy of the
    softmax over the C + 1 scores ``s_j = -||h - mu_j||`` (m last) with the predicted class as
    target; its gradient with respect to m has the closed form

        g(h) = p_m(h) (h - m) / ||h - m||,    p_m = softmax(s)_m,

    whatever the target class (it is never the OOD prototype), so no backward pass is needed
    (OpenOOD back-propagates per sample; its ``use_direct_grad`` option is this formula). The
    bank holds g of the correctly classified training samples (label = argmax of the training
    logits); the score is minus the squared Euclidean distance from g(h) to its k-th nearest
    bank gradient (squared, as faiss ``IndexFlatL2`` returns it). An ID sample near its class
    prototype has a small p_m, like the training gradients; an OOD sample pulls towards m.

    Distances to the prototypes come from float32 products of vectors centred at m (so the
    products do not cancel large norms), log p_m from a float64 log-sum-exp; the neighbour
    search is exact and the k-th distance is recomputed in float64. With ``backend="auto"`` the
    search is the shared scan of the training rows (docs/methods.md#shared-scans): g is a
    per-row factor times ``h - m``, so ``2 g.g_j - ||g_j||^2`` follows from the float32 product
    of the centred test and training rows that knn and gmm use too, by per-row and per-column
    terms. ``"faiss"`` (``IndexFlatIP``) and ``"numpy"`` search an index of the gradients
    augmented by ``-||g_j||^2 / 2`` (the largest inner product is the nearest gradient).

    The OOD prototype: OpenOOD v1.5's configuration (``use_val_ood: True``) takes the mean
    feature of validation OOD images, ``noise="val_ood"`` here (fit then needs
    ``val_ood_features``; in a run, the features of the set ``search.val_ood`` names, checked
    disjoint from every test OOD class). The default, ``noise="proto_mean"``, is OpenOOD's
    ``use_proto_mean`` option, m = the mean of the class prototypes, which needs ID arrays
    only. Departures (docs/methods.md#grood): the paper's prototype comes from synthetic images
    (mixup of early-layer features, or blurred uniform noise), which stored features do not
    hold. OpenOOD searches an
    approximate ``IndexIVFFlat`` (nprobe 4) and always takes the nearest neighbour whatever
    ``k``; semshift's search is exact and uses ``k``. With ``sampling_ratio < 1`` OpenOOD
    takes the first batches of a shuffled loader; semshift the evenly spaced rows
    ``floor(i n / int(sampling_ratio n))``.

    Parameters
    ----------
    k : int, default 1
        Which nearest bank gradient (OpenOOD's ``k: 1``).
    sampling_ratio : float, default 1.0
        Fraction of the training rows used for the prototypes and the bank.
    noise : {"proto_mean", "val_ood"}, default "proto_mean"
        The OOD prototype: the mean of the class prototypes, or the mean of the validation
        OOD features given to fit (``val_ood_features``).
    backend : {"auto", "numpy", "faiss"}, default "auto"
        Search backend; ``"auto"`` is the shared scan.

    Attributes
    ----------
    prototypes_ : float64 array (C, D)
        Class prototypes mu_c.
    noise_prototype_ : float64 array (D,)
        The OOD prototype m.
    n_bank_ : int
        Number of bank gradients (correctly classified training rows used).
    backend_ : str
        The backend used ("scan", "numpy" or "faiss").

    Raises
    ------
    InputError
        (fit) A class has no training row among those used, the bank has fewer than k
        gradients, or ``noise="val_ood"`` without ``val_ood_features``.

    Examples
    --------
    >>> import numpy as np
    >>> from semshift import detectors
    >>> h = np.array([[-1.5], [-0.5], [0.5], [1.5]])  # prototypes -1 and 1, m = 0
    >>> y = np.array([0, 0, 1, 1])
    >>> z = np.stack([-h[:, 0], h[:, 0]], axis=1)  # every row correctly classified
    >>> det = detectors.get("grood").fit(features=h, logits=z, labels=y)
    >>> det.score(features=np.array([[0.0], [0.25], [3.0]])).round(4)  # m, near m, beyond mu_1
    array([-0.0599, -0.0071, -0.    ])

    References
    ----------
    .. [1] M. ElAraby, S. Sahoo, Y. Pequignot, P. Novello and L. Paull, "GROOD: Gradient-Aware
       Out-of-Distribution Detection", TMLR 2025 (arXiv:2312.14427).
    """

    name = "grood"
    fit_requires = frozenset({"features", "logits", "labels"})
    fit_accepts = frozenset({"val_ood_features"})
    score_requires = frozenset({"features"})
    _parameter_constraints: ClassVar[ParamConstraints] = {
        "k": [Interval(Integral, 1, None, closed="left")],  # k <= bank size is checked in fit
        "sampling_ratio": [Interval(Real, 0, 1, closed="right")],
        "noise": [StrOptions(NOISE_PROTOTYPES)],
        "backend": [StrOptions(BACKENDS)],  # "faiss" without faiss installed: fit refuses
    }
    #: OpenOOD v1.5's sweep (configs/postprocessors/grood.yaml); its code ignores k
    search_space: ClassVar[SearchSpace] = {
        "k": (1, 10, 20, 50, 100),
        "sampling_ratio": (0.01, 0.1, 0.25, 0.5, 0.7, 1.0),
    }

    def __init__(
        self,
        *,
        k: int = 1,
        sampling_ratio: float = 1.0,
        noise: str = "proto_mean",
        backend: str = "auto",
    ) -> None:
        self.k = k
        self.sampling_ratio = sampling_ratio
        self.noise = noise
        self.backend = backend

    def _fit(self, inputs: Inputs) -> None:
        x, z, y = inputs.get("features"), inputs.get("logits"), inputs.get("labels")
        n, n_classes = int(x.shape[0]), int(z.shape[1])
        m = int(float(self.sampling_ratio) * n) if float(self.sampling_ratio) < 1.0 else n
        if m < 1:
            raise InputError(
                f"grood.fit: sampling_ratio = {self.sampling_ratio} of n = {n} training rows "
                "keeps int(sampling_ratio * n) = 0 rows; give more rows or a larger "
                "sampling_ratio"
            )
        rows = (np.arange(m, dtype=np.int64) * n) // m if m < n else None
        if rows is not None:
            x, z, y = x[rows], z[rows], y[rows]
        counts = np.bincount(y, minlength=n_classes)
        missing = np.flatnonzero(counts == 0)
        if missing.size:
            shown = ", ".join(str(int(c)) for c in missing[:10])
            shown += " ..." if missing.size > 10 else ""
            raise InputError(
                f"grood.fit: {missing.size} class(es) have no training row to build their "
                f"prototype from (among the {m} rows used, sampling_ratio = "
                f"{self.sampling_ratio}): class id(s) {shown}; give rows of every class in "
                f"[0, {n_classes}) or a larger sampling_ratio"
            )
        self.prototypes_: F64 = class_sums(x, y, n_classes) / counts[:, None]
        self.noise_prototype_: F64 = self._noise_prototype(inputs)
        centred = self.prototypes_ - self.noise_prototype_
        self._centred32: F32 = np.ascontiguousarray(centred, dtype=np.float32)
        self._sq_centred: F64 = np.einsum("ij,ij->i", centred, centred)
        correct = np.flatnonzero(np.argmax(z, axis=1) == y)
        if correct.size < int(self.k):
            raise InputError(
                f"grood.fit: k = {self.k} neighbours requested but only {correct.size} of the "
                f"{m} training rows used are correctly classified (the bank); lower k or give "
                "more training rows"
            )
        self.n_bank_ = int(correct.size)
        if self.backend == "auto":
            self._fit_scan(inputs, correct if rows is None else rows[correct], x[correct])
            return
        d = int(x.shape[1])
        bank = np.empty((correct.size, d + 1), dtype=np.float32)
        for sl in row_blocks(correct.size, 48 * (d + n_classes)):
            g = self.gradients(x[correct[sl]])
            bank[sl, :d] = g
            bank[sl, d] = -0.5 * np.einsum("ij,ij->i", g, g)
        self.backend_ = resolve_backend("grood", self.backend)
        self._index = InnerProductIndex(bank, self.backend_)

    def _fit_scan(self, inputs: Inputs, cols: np.ndarray, x_bank: np.ndarray) -> None:
        """The column terms of the shared scan; ``cols`` are the bank's training rows."""
        self.backend_ = "scan"
        self._rows: TrainRows = train_rows(inputs)
        n_train = int(self._rows.rows32.shape[0])
        e = self._rows.center - self.noise_prototype_  # c - m
        self._a = np.zeros(n_train, dtype=np.float64)  # g_j = a_j (x_j - m); 0 off the bank
        for sl in row_blocks(cols.size, 48 * (x_bank.shape[1] + self.prototypes_.shape[0])):
            self._a[cols[sl]] = self._factors(x_bank[sl])[1]
        # a_j e.(x_j - c), and ||g_j||^2 (+inf off the bank: never a neighbour)
        self._col = self._a * (self._rows.rows32 @ e.astype(np.float32)).astype(np.float64)
        self._sq = np.full(n_train, np.inf)
        for sl in row_blocks(cols.size, 8 * x_bank.shape[1]):
            diff = self._rows.rows(cols[sl]) - self.noise_prototype_
            self._sq[cols[sl]] = self._a[cols[sl]] ** 2 * np.einsum("ij,ij->i", diff, diff)
        self._token = digest("grood", self.k, self._a, e, self._rows.token)

    def requests(self) -> tuple[Request, ...]:
        if getattr(self, "backend_", None) != "scan":
            return ()
        return (scan_request(self._rows, self._token, self._reduce),)

    def _reduce(self, hc: F64, prod: F32) -> Float64Array:
        """Scores of one block of the scan. With e = c - m, ``(h - m).(x_j - m) = P + (h -
        c).e + e.(x_j - c) + e.e``, so ``2 g.g_j - ||g_j||^2 = 2 a ((P + r) a_j + y_j) -
        ||g_j||^2`` (r, y_j the row and column terms), largest at the nearest bank gradient."""
        c = self._rows.center
        e = c - self.noise_prototype_
        hm, a = self._factors(hc + c)
        t = np.add(prod, (hc @ e + e @ e)[:, None])
        t *= self._a
        t += self._col
        t *= 2.0 * a[:, None]
        t -= self._sq
        j = kth_largest(t, int(self.k))
        del t
        diff = hm * a[:, None] - (self._rows.rows(j) - self.noise_prototype_) * self._a[j, None]
        return -np.einsum("ij,ij->i", diff, diff)

    def _noise_prototype(self, inputs: Inputs) -> F64:
        """The OOD prototype m (D,), float64, that ``noise`` names."""
        if self.noise == "proto_mean":
            return self.prototypes_.mean(axis=0)
        if "val_ood_features" not in inputs.arrays:
            raise InputError(
                "grood.fit: noise='val_ood' needs `val_ood_features` (penultimate features of "
                "validation OOD samples, never test OOD; in a run, the set search.val_ood "
                "names), which was not given; give them or use noise='proto_mean'"
            )
        ood = inputs.get("val_ood_features")
        return np.asarray(ood.sum(axis=0, dtype=np.float64) / ood.shape[0], dtype=np.float64)

    def gradients(self, h: np.ndarray) -> F64:
        """The gradients g(h) (n, D), float64, of feature rows ``h`` (n, D) (after ``fit``)."""
        hc, a = self._factors(h)
        return hc * a[:, None]

    def _factors(self, h: np.ndarray) -> tuple[F64, F64]:
        """``h - m`` (n, D) and the factor a (n,) with ``g(h) = a (h - m)``, float64."""
        hc = np.asarray(h, dtype=np.float64) - self.noise_prototype_
        sq = np.einsum("ij,ij->i", hc, hc)
        # squared distances to the class prototypes from centred float32 products
        d2 = (hc.astype(np.float32) @ self._centred32.T).astype(np.float64)
        d2 *= -2.0
        d2 += sq[:, None]
        d2 += self._sq_centred[None, :]
        s = -np.sqrt(np.maximum(d2, 0.0, out=d2), out=d2)  # scores of the class prototypes
        dist_m = np.sqrt(sq)
        top = np.maximum(s.max(axis=1), -dist_m)
        total = np.exp(s - top[:, None]).sum(axis=1) + np.exp(-dist_m - top)
        p_m = np.exp(-dist_m - top) / total  # softmax entry of the OOD prototype
        # (h - m) / ||h - m||, the zero vector at h = m (torch's subgradient of the norm)
        return hc, p_m / np.maximum(dist_m, 1e-12)

    def _score(self, inputs: Inputs) -> Float64Array:
        if self.backend_ == "scan":
            return scan_scores(inputs, self.requests()[0])
        h = inputs.get("features")
        k = int(self.k)
        d = int(h.shape[1])
        out = np.empty(h.shape[0], dtype=np.float64)
        for sl in row_blocks(h.shape[0], 48 * (d + self.prototypes_.shape[0])):
            g = self.gradients(h[sl])
            query = np.empty((g.shape[0], d + 1), dtype=np.float32)
            query[:, :d] = g
            query[:, d] = 1.0
            _, idx = self._index.search(query, k)
            nearest_k = self._index.rows(idx[:, k - 1])[:, :d].astype(np.float64)
            diff = g - nearest_k
            out[sl] = -np.einsum("ij,ij->i", diff, diff)
        return out
