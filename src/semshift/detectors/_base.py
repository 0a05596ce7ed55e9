"""The :class:`Detector` base class and the input validation every detector shares.

A detector receives named inputs (see :data:`INPUT_NAMES`) and declares which it consumes in
``fit_requires`` and ``score_requires``; ``requires`` is their union. :meth:`Detector.fit` and
:meth:`Detector.score` validate exactly the inputs the detector needs (presence, shape, dtype,
finiteness, label range, agreement between arrays and with what ``fit`` saw) and hand a
:class:`Inputs` object to the subclass hooks ``_fit`` and ``_score``. Inputs a detector does not
need are ignored, not validated.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

from semshift.errors import InputError, NotFittedError

from ._common import row_blocks
from ._params import ParamConstraints, SearchSpace, validate_params
from ._shared import Request, SharedResults, chunks

__all__ = ["INPUT_NAMES", "LEVELS", "Detector", "Inputs"]

_T = TypeVar("_T")
FloatArray = NDArray[np.floating[Any]]
Float64Array = NDArray[np.float64]
IntArray = NDArray[np.integer[Any]]

#: Every input a detector may consume, with what it is (used in error messages and docs).
INPUT_NAMES: dict[str, str] = {
    "logits": "logits z, array (n, C)",
    "features": "penultimate features h, array (n, D)",
    "head": "linear head (W, b), W (C, D) and b (C,)",
    "labels": "integer class labels in [0, C), array (n,)",
    "val_logits": "logits of labelled ID validation samples, array (m, C)",
    "val_labels": "integer labels of the validation samples in [0, C), array (m,)",
    "val_ood_features": (
        "penultimate features of validation OOD samples (never test OOD), array (m, D)"
    ),
}
#: Where a detector runs: ``"post_hoc"`` on stored logits/features (fitted and scored by this
#: package), ``"model"`` during feature extraction, with the network and the images.
LEVELS: tuple[str, ...] = ("post_hoc", "model")
Level = Literal["post_hoc", "model"]
_SCORE_INPUTS = frozenset({"logits", "features"})
_MATRICES = ("logits", "features", "val_logits")
_LABELS = {"labels": "logits", "val_labels": "val_logits"}


@dataclass
class Inputs:
    """Validated inputs, as given (no copy); ``n_classes`` and ``n_features`` when known.

    At score time ``shared`` (optional) memoises quantities other detectors compute on the same
    arrays, and ``rows`` is the chunk of the caller's rows these arrays are (see
    :meth:`share`).
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    n_classes: int | None = None
    n_features: int | None = None
    shared: SharedResults | None = None
    rows: tuple[int, int] = (0, 0)

    def get(self, name: str) -> np.ndarray:
        """The validated array ``name`` (``W`` and ``b`` of the head are ``head_W``/``head_b``)."""
        return self.arrays[name]

    def share(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, or the value another detector computed for the same key and rows.

        ``key`` must name the quantity and everything it depends on besides the input rows (a
        digest of the fitted arrays involved); without a :class:`SharedResults` this is just
        ``compute()``.
        """
        if self.shared is None:
            return compute()
        return self.shared.get((key, self.rows), compute)

    def chunk(self, sl: slice) -> Inputs:
        """The same inputs restricted to rows ``sl`` of the score-time arrays."""
        arrays = {k: (v[sl] if k in _SCORE_INPUTS else v) for k, v in self.arrays.items()}
        return Inputs(arrays, self.n_classes, self.n_features, self.shared, (sl.start, sl.stop))

    @property
    def head(self) -> tuple[FloatArray, FloatArray]:
        """The head ``(W, b)``, W (C, D) and b (C,)."""
        return self.arrays["head_W"], self.arrays["head_b"]


def _real_array(name: str, value: object, ndim: int, owner: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu" or arr.dtype.kind == "b":
        raise InputError(f"{owner}: `{name}` must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise InputError(
            f"{owner}: `{name}` must be {ndim}-D ({INPUT_NAMES.get(name, name)}), "
            f"got shape {arr.shape}"
        )
    if arr.size == 0:
        raise InputError(f"{owner}: `{name}` is empty (shape {arr.shape})")
    return arr


def check_finite(name: str, arr: np.ndarray, owner: str) -> None:
    """Raise :class:`InputError` naming ``name``, the count and the first index of NaN/inf values.

    Runs over row blocks, so checking a large array allocates only a block-sized mask.
    """
    if arr.dtype.kind != "f":
        return
    with np.errstate(all="ignore"):
        if np.isfinite(np.add.reduce(arr, axis=None)):
            return  # NaN and inf propagate into the sum; a finite sum means no NaN/inf
    # the sum is NaN/inf: find the first bad entry (or find none: a float overflow of the sum)
    flat_rows = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr.reshape(-1, 1)
    bad_count = 0
    first: tuple[int, ...] | None = None
    for sl in row_blocks(flat_rows.shape[0], flat_rows.shape[1] * arr.itemsize):
        bad = ~np.isfinite(flat_rows[sl])
        n_bad = int(np.count_nonzero(bad))
        if n_bad:
            if first is None:
                r, c = np.argwhere(bad)[0]
                row = sl.start + int(r)
                first = (row, int(c)) if arr.ndim > 1 else (row,)
            bad_count += n_bad
    if first is not None:
        where = ", ".join(str(i) for i in first)
        raise InputError(
            f"{owner}: `{name}` contains {bad_count} NaN or infinite value(s), the first at "
            f"index [{where}]; remove or impute them before calling"
        )


def validate_inputs(
    owner: str,
    needed: frozenset[str],
    given: Mapping[str, object],
    *,
    n_classes: int | None = None,
    n_features: int | None = None,
    shared: SharedResults | None = None,
) -> Inputs:
    """Check the inputs in ``needed`` and return them in an :class:`Inputs`.

    Parameters
    ----------
    owner : str
        ``"<detector>.fit"`` or ``"<detector>.score"``, used to prefix error messages.
    needed : frozenset of str
        Names among :data:`INPUT_NAMES` that must be present; the others are ignored.
    given : mapping
        Input name -> value (``None`` means not given).
    n_classes, n_features : int, optional
        What ``fit`` learned; checked against the new inputs at score time.
    shared : SharedResults, optional
        Memo of the score-time finiteness checks (each array is scanned once for every
        detector scored with it).

    Raises
    ------
    InputError
        A needed input is missing, has the wrong shape or dtype, contains NaN/inf, the arrays
        disagree on the number of samples, classes or feature dimension, or labels are out of
        range.
    """
    missing = sorted(name for name in needed if given.get(name) is None)
    if missing:
        what = "; ".join(f"`{m}` ({INPUT_NAMES[m]})" for m in missing)
        raise InputError(f"{owner}() needs {what}, which was not given")
    out = Inputs(n_classes=n_classes, n_features=n_features)

    def agree_classes(source: str, c: int) -> None:
        if out.n_classes is not None and out.n_classes != c:
            other = "fit saw" if n_classes is not None else "other inputs have"
            raise InputError(f"{owner}: `{source}` has {c} classes but {other} {out.n_classes}")
        out.n_classes = c

    if "head" in needed:
        head = given["head"]
        if not isinstance(head, tuple | list) or len(head) != 2:
            raise InputError(f"{owner}: `head` must be a pair (W, b), got {type(head).__name__}")
        w = _real_array("head W", head[0], 2, owner)
        b = _real_array("head b", head[1], 1, owner)
        if b.shape[0] != w.shape[0]:
            raise InputError(
                f"{owner}: head bias b has {b.shape[0]} entries but W has {w.shape[0]} rows"
            )
        check_finite("head W", w, owner)
        check_finite("head b", b, owner)
        agree_classes("head", int(w.shape[0]))
        if out.n_features is not None and out.n_features != w.shape[1]:
            raise InputError(
                f"{owner}: head W has {w.shape[1]} columns but fit saw features of dimension "
                f"{out.n_features}"
            )
        out.n_features = int(w.shape[1])
        out.arrays["head_W"], out.arrays["head_b"] = w, b

    for name in _MATRICES:
        if name not in needed:
            continue
        arr = _real_array(name, given[name], 2, owner)
        if shared is not None and name in _SCORE_INPUTS:
            shared.get(("finite", name), functools.partial(check_finite, name, arr, owner))
        else:
            check_finite(name, arr, owner)
        if name == "features":
            d = int(arr.shape[1])
            if out.n_features is not None and out.n_features != d:
                against = "the head's" if "head_W" in out.arrays else "fit's"
                raise InputError(
                    f"{owner}: feature dimension {d} does not match {against} {out.n_features} "
                    f"(features have shape {arr.shape})"
                )
            out.n_features = d
        else:
            agree_classes(name, int(arr.shape[1]))
        out.arrays[name] = arr

    if "val_ood_features" in needed:
        arr = _real_array("val_ood_features", given["val_ood_features"], 2, owner)
        check_finite("val_ood_features", arr, owner)
        if out.n_features is not None and out.n_features != arr.shape[1]:
            raise InputError(
                f"{owner}: `val_ood_features` have dimension {arr.shape[1]} but the features "
                f"have {out.n_features}"
            )
        out.arrays["val_ood_features"] = arr

    rows: dict[str, int] = {
        name: int(out.arrays[name].shape[0]) for name in ("logits", "features") if name in needed
    }
    for label_name, partner in _LABELS.items():
        if label_name not in needed:
            continue
        lab = np.asarray(given[label_name])
        if lab.ndim != 1 or lab.dtype.kind not in "iu":
            raise InputError(
                f"{owner}: `{label_name}` must be a 1-D integer array, got dtype {lab.dtype} "
                f"and shape {lab.shape}"
            )
        if lab.size == 0:
            raise InputError(f"{owner}: `{label_name}` is empty")
        lo, hi = int(lab.min()), int(lab.max())
        if lo < 0 or (out.n_classes is not None and hi >= out.n_classes):
            bad = int(np.argmax((lab < 0) | (lab >= (out.n_classes or hi + 1))))
            bound = f"[0, {out.n_classes})" if out.n_classes is not None else ">= 0"
            hint = " (-1 marks unknown samples, which cannot be used for fitting)"
            raise InputError(
                f"{owner}: `{label_name}` must lie in {bound}; index {bad} holds {int(lab[bad])}"
                + (hint if int(lab[bad]) < 0 else "")
            )
        if out.n_classes is None:
            out.n_classes = hi + 1
        if partner == "logits":
            rows[label_name] = int(lab.shape[0])
        elif "val_logits" in needed and out.arrays["val_logits"].shape[0] != lab.shape[0]:
            raise InputError(
                f"{owner}: `val_labels` has {lab.shape[0]} entries but `val_logits` has "
                f"{out.arrays['val_logits'].shape[0]} rows"
            )
        out.arrays[label_name] = lab
    if len(set(rows.values())) > 1:
        shapes = ", ".join(f"`{k}` {v}" for k, v in rows.items())
        raise InputError(f"{owner}: inputs disagree on the number of samples: {shapes}")
    return out


class Detector:
    """Base class of every registered OOD detector (post-hoc ones compute their score here).

    Subclasses set the class attributes ``name``, ``fit_requires`` and ``score_requires``, take
    their hyperparameters as explicit keyword arguments in ``__init__`` (stored unchanged, as in
    scikit-learn), declare the values each accepts in ``_parameter_constraints`` and implement
    ``_fit(inputs)`` and ``_score(inputs)``.

    Attributes
    ----------
    name : str
        Registry name.
    level : {"post_hoc", "model"}
        ``"post_hoc"``: scored from stored inputs by :meth:`fit` and :meth:`score`. Model-level
        detectors (:mod:`semshift.detectors.model_level`) say ``"model"``: they are declared
        here (name, hyperparameters, constraints) but computed during feature extraction.
    _parameter_constraints : dict of str to list of Constraint or None
        For each keyword hyperparameter of ``__init__``, the accepted values (see
        :mod:`semshift.detectors._params`): checked by :func:`semshift.detectors.check_params`,
        :func:`semshift.detectors.get` and :meth:`fit`. :func:`register_detector` refuses a
        class that leaves a hyperparameter undeclared.
    search_space : dict of str to tuple
        The candidates a hyperparameter search tries for each tunable hyperparameter, in the
        order they are tried (ties go to the first; see docs/methods.md#hyperparameter-search
        and :func:`semshift.detectors.get_search_space`). Declared beside
        ``_parameter_constraints``; :func:`register_detector` refuses a candidate outside the
        constraints. Empty for detectors with nothing to tune and for model-level detectors,
        whose hyperparameters are fixed when the features are extracted.
    fit_requires, score_requires : frozenset of str
        The inputs (:data:`INPUT_NAMES`) needed by :meth:`fit` and :meth:`score`.
    requires : frozenset of str
        Union of the two: everything the caller must be able to provide.
    n_classes_ : int or None
        Number of classes seen in ``fit`` (None when fit sees no class-shaped input).
    n_features_in_ : int or None
        Feature dimension seen in ``fit`` (None when fit sees no features or head).
    """

    name: ClassVar[str] = ""
    level: ClassVar[Level] = "post_hoc"
    _parameter_constraints: ClassVar[ParamConstraints] = {}
    search_space: ClassVar[SearchSpace] = {}
    fit_requires: ClassVar[frozenset[str]] = frozenset()
    #: Inputs :meth:`fit` uses when given (validated then) and does without otherwise, for
    #: options that need them (GrOOD's validation-OOD prototype); not part of ``requires``.
    fit_accepts: ClassVar[frozenset[str]] = frozenset()
    score_requires: ClassVar[frozenset[str]] = frozenset()
    requires: ClassVar[frozenset[str]] = frozenset()
    #: Detectors with the same group may share their fit's main computation (see
    #: :func:`fit_many`, which starts one of each group before the others).
    fit_group: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = (cls.fit_requires | cls.fit_accepts | cls.score_requires) - INPUT_NAMES.keys()
        if unknown or not cls.score_requires <= _SCORE_INPUTS:
            raise TypeError(f"{cls.__name__}: bad requires declaration {sorted(unknown)}")
        cls.requires = cls.fit_requires | cls.score_requires

    # -- scikit-learn style parameter handling -------------------------------------------------
    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the keyword hyperparameters accepted by ``__init__``."""
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters, as passed to ``__init__``."""
        return {name: getattr(self, name) for name in self.param_names()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def _check_params(self) -> None:
        """Validate the hyperparameters against ``_parameter_constraints`` (called by :meth:`fit`).

        Checks that depend on the data (k against the number of training rows) belong in
        ``_fit``.
        """
        validate_params(self.name, self._parameter_constraints, self.get_params())

    # -- public API ------------------------------------------------------------------------------
    def fit(
        self,
        *,
        logits: FloatArray | None = None,
        features: FloatArray | None = None,
        head: tuple[FloatArray, FloatArray] | None = None,
        labels: IntArray | None = None,
        val_logits: FloatArray | None = None,
        val_labels: IntArray | None = None,
        val_ood_features: FloatArray | None = None,
        shared: SharedResults | None = None,
    ) -> Self:
        """Fit on in-distribution data; inputs in neither ``fit_requires`` nor ``fit_accepts``
        are ignored.

        Parameters
        ----------
        logits : array (n, C), optional
            Logits of the ID training samples.
        features : array (n, D), optional
            Penultimate features of the ID training samples.
        head : tuple (W, b), optional
            Linear head, W (C, D) and b (C,), so that logits = features @ W.T + b.
        labels : int array (n,), optional
            Class labels of the training samples, in [0, C).
        val_logits : array (m, C), optional
            Logits of labelled ID validation samples.
        val_labels : int array (m,), optional
            Their labels, in [0, C).
        val_ood_features : array (m, D), optional
            Penultimate features of validation OOD samples (disjoint from every test OOD
            class), for detectors that accept them.
        shared : SharedResults, optional
            Quantities shared with other detectors fitted on the very same input objects (the
            class statistics of mahalanobis and rmd, the principal subspace of vim and
            residual); see :func:`fit_many`. The fitted state does not depend on it.

        Returns
        -------
        self
        """
        self._check_params()
        given = {
            "logits": logits,
            "features": features,
            "head": head,
            "labels": labels,
            "val_logits": val_logits,
            "val_labels": val_labels,
            "val_ood_features": val_ood_features,
        }
        owner = f"{self.name}.fit"
        needed = self.fit_requires | {k for k in self.fit_accepts if given.get(k) is not None}
        if shared is not None:
            shared.check({k: v for k, v in given.items() if k in self.fit_requires}, owner)
        inputs = validate_inputs(owner, needed, given, shared=shared)
        inputs.shared = shared
        self._fit(inputs)
        self.n_classes_ = inputs.n_classes
        self.n_features_in_ = inputs.n_features
        return self

    def score(
        self,
        *,
        logits: FloatArray | None = None,
        features: FloatArray | None = None,
        shared: SharedResults | None = None,
    ) -> Float64Array:
        """Normality scores: higher = more in-distribution.

        Inputs are scored in chunks of :func:`semshift.detectors._shared.chunk_rows` rows, so
        memory stays bounded whatever the number of rows.

        Parameters
        ----------
        logits : array (n, C), optional
            Test logits (needed when ``"logits"`` is in ``score_requires``).
        features : array (n, D), optional
            Test features (needed when ``"features"`` is in ``score_requires``).
        shared : SharedResults, optional
            Quantities shared with other detectors scored on the same ``logits`` and
            ``features`` (the very same array objects); see :func:`score_many`. The scores do
            not depend on it.

        Returns
        -------
        scores : float64 array (n,)
            Higher = more in-distribution.

        Raises
        ------
        NotFittedError
            :meth:`fit` has not been called.
        """
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(
                f"this {type(self).__name__} detector is not fitted yet; call fit() first"
            )
        given = {"logits": logits, "features": features}
        if shared is not None:
            shared.check(given, f"{self.name}.score")
        inputs = validate_inputs(
            f"{self.name}.score",
            self.score_requires,
            given,
            n_classes=self.n_classes_,
            n_features=self.n_features_in_,
            shared=shared,
        )
        inputs.shared = shared
        # the chunks depend on the number of rows only: every detector cuts the same ones (and
        # can share per-chunk results), and a score never depends on what else was given
        n = int(inputs.get(min(self.score_requires)).shape[0]) if self.score_requires else 0
        parts = [np.asarray(self._score(inputs.chunk(sl)), dtype=np.float64) for sl in chunks(n)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    # -- hooks -------------------------------------------------------------------------------------
    def _fit(self, inputs: Inputs) -> None:
        """Learn from validated inputs (default: nothing to learn)."""

    def _score(self, inputs: Inputs) -> Float64Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def requests(self) -> tuple[Request, ...]:
        """The shared computations this fitted detector consumes when scored (default none).

        :func:`score_many` declares them to its :class:`SharedResults`, so that one
        computation serves every detector of a request's group (see
        :class:`~semshift.detectors._shared.Request`); the scores are the same either way.
        """
        return ()


def require_class_counts(
    owner: str, counts: NDArray[np.int64], what: str, minimum: int = 1
) -> None:
    """Raise :class:`InputError` naming the classes with fewer than ``minimum`` samples."""
    bad = np.flatnonzero(counts < minimum)
    if bad.size:
        shown = ", ".join(str(int(c)) for c in bad[:10]) + (" ..." if bad.size > 10 else "")
        raise InputError(
            f"{owner}: {bad.size} class(es) have fewer than {minimum} {what}: class id(s) "
            f"{shown}; every class in [0, {counts.size}) needs {minimum} or more"
        )
