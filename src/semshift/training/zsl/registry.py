"""The zero-shot method registry and the contract every method follows.

A method is a class derived from :class:`ZSLMethod`, registered with :func:`register_zsl_method`
where it is defined. Its ``__init__`` takes explicit keyword hyperparameters with the paper's
defaults and only stores them (checked against :attr:`ZSLMethod.constraints`, declared beside
them); :meth:`~ZSLMethod.fit` takes image features ``X`` (n, d), class indices ``y`` (n,) and
the class embeddings ``S`` (C, a) of the training classes and returns ``self``;
:meth:`~ZSLMethod.decision_function` scores images against the embeddings of any classes
(higher = more compatible), so one fitted model gives the ZSL scores (unseen classes) and the
GZSL scores (seen and unseen). :attr:`~ZSLMethod.grid` is the hyperparameter grid searched on
the split's val classes.

>>> from semshift.training.zsl import get_zsl_method, list_zsl_methods
>>> list_zsl_methods()  # doctest: +NORMALIZE_WHITESPACE
['dap', 'iap', 'conse', 'cmt', 'cmt_star', 'sse', 'latem', 'ale', 'devise', 'sje', 'eszsl',
 'sync', 'sae', 'gfzsl']
>>> get_zsl_method("eszsl")().get_params()
{'gamma': 1.0, 'lam': 1.0, 'targets': 'onehot'}
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError, NotFittedError, unknown_name
from semshift.params import Constraint, validate_params
from semshift.registry import Registry

__all__ = [
    "ZSL_METHODS",
    "ZSLMethod",
    "check_fit_inputs",
    "get_zsl_method",
    "list_zsl_methods",
    "register_zsl_method",
]

F64 = NDArray[np.float64]


def check_fit_inputs(
    X: ArrayLike, y: ArrayLike, S: ArrayLike, method: str
) -> tuple[F64, NDArray[np.int64], F64]:
    """Validate ``fit(X, y, S)``: finite float arrays, ``y`` indexing rows of ``S``, every
    row of ``S`` with at least one image."""
    Xa = np.asarray(X, dtype=np.float64)
    Sa = np.asarray(S, dtype=np.float64)
    ya = np.asarray(y)
    if Xa.ndim != 2 or Sa.ndim != 2 or ya.ndim != 1:
        raise InputError(
            f"{method}.fit: X must be (n, d), y (n,), S (C, a); got {Xa.shape}, {ya.shape}, "
            f"{Sa.shape}"
        )
    if Xa.shape[0] != ya.size:
        raise InputError(f"{method}.fit: X has {Xa.shape[0]} rows but y has {ya.size}")
    if not np.issubdtype(ya.dtype, np.integer):
        raise InputError(f"{method}.fit: y must hold integer class indices into S")
    if ya.size and (ya.min() < 0 or ya.max() >= Sa.shape[0]):
        raise InputError(
            f"{method}.fit: mismatched class counts: y reaches class {int(ya.max())} but S has "
            f"{Sa.shape[0]} rows"
        )
    if Sa.shape[0] < 2:
        raise InputError(f"{method}.fit: needs at least 2 training classes")
    if not np.isfinite(Sa).all():
        raise InputError(f"{method}.fit: class embeddings S contain NaN or inf")
    if not np.isfinite(Xa).all():
        raise InputError(f"{method}.fit: features X contain NaN or inf")
    empty = np.flatnonzero(np.bincount(ya, minlength=Sa.shape[0]) == 0)
    if empty.size:
        raise InputError(
            f"{method}.fit: {empty.size} class(es) of S have no image in y (first {empty[0]})"
        )
    return Xa, ya.astype(np.int64), Sa


class ZSLMethod:
    """Base class of a zero-shot method (see the module docstring for the contract).

    Class attributes
    ----------------
    name : registry name
    title : display name (the paper's table row)
    reference : the paper
    constraints : hyperparameter name -> list of :mod:`semshift.params` constraints (a value is
        valid when it satisfies one of them), as detectors declare ``_parameter_constraints``
    grid : hyperparameter name -> values tried on the val classes (a full product)
    order : position in :func:`list_zsl_methods` (the paper's table order)
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    constraints: ClassVar[Mapping[str, Sequence[Constraint | None]]] = {}
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {}
    order: ClassVar[int] = 100

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            params = set(cls._param_names())
            for key in (*cls.constraints, *cls.grid):
                if key not in params:
                    raise TypeError(f"{cls.__name__}: {key!r} is not an __init__ parameter")

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The paper's default hyperparameters (the ``__init__`` defaults)."""
        sig = inspect.signature(cls.__init__)
        return {k: p.default for k, p in sig.parameters.items() if k != "self"}

    def _validate(self) -> None:
        validate_params(
            self.name, self.constraints, {k: getattr(self, k) for k in self.constraints}
        )

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters as a dict."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params: Any) -> ZSLMethod:
        """Set hyperparameters (checked) and return ``self``."""
        known = self._param_names()
        for key, value in params.items():
            if key not in known:
                raise InputError(
                    f"{self.name}: unknown hyperparameter {key!r}; known: {', '.join(known)}"
                )
            setattr(self, key, value)
        self._validate()
        return self

    def fit(self, X: ArrayLike, y: ArrayLike, S: ArrayLike) -> ZSLMethod:
        """Fit on features ``X`` (n, d) of classes ``y`` (indices into ``S``), with the
        training classes' embeddings ``S`` (C, a). Returns ``self``."""
        self._validate()
        Xa, ya, Sa = check_fit_inputs(X, y, S, self.name)
        self._fit(Xa, ya, Sa)
        self.n_features_in_ = Xa.shape[1]
        self.embedding_dim_ = Sa.shape[1]
        return self

    def _fit(self, X: F64, y: NDArray[np.int64], S: F64) -> None:
        raise NotImplementedError

    @classmethod
    def fit_grid(
        cls, X: F64, y: NDArray[np.int64], S: F64, candidates: Sequence[Mapping[str, Any]]
    ) -> Iterator[ZSLMethod]:
        """One fitted model per hyperparameter set of ``candidates`` (others at their
        defaults), in order. Methods override it to share work across the grid (a Gram
        matrix, a classifier)."""
        for params in candidates:
            yield cls(**params).fit(X, y, S)

    def decision_function(self, X: ArrayLike, S: ArrayLike) -> F64:
        """Compatibility scores of images ``X`` (n, d) with classes ``S`` (C', a): (n, C'),
        higher = more compatible."""
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError(f"{self.name}: call fit before decision_function")
        Xa = np.asarray(X, dtype=np.float64)
        Sa = np.asarray(S, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features_in_:
            raise InputError(f"{self.name}: X must be (n, {self.n_features_in_}), got {Xa.shape}")
        if Sa.ndim != 2 or Sa.shape[1] != self.embedding_dim_:
            raise InputError(f"{self.name}: S must be (C, {self.embedding_dim_}), got {Sa.shape}")
        return self._scores(Xa, Sa)

    def _scores(self, X: F64, S: F64) -> F64:
        raise NotImplementedError

    def predict(self, X: ArrayLike, S: ArrayLike) -> NDArray[np.int64]:
        """The row of ``S`` with the highest score, per image: (n,)."""
        return np.argmax(self.decision_function(X, S), axis=1).astype(np.int64)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


M = TypeVar("M", bound=type[ZSLMethod])


def _load_all() -> None:
    import semshift.training.zsl  # noqa: F401  (the package imports every method module)


def _adopt(name: str, cls: Any) -> None:
    """Register the class a ``semshift.zsl_methods`` entry point names."""
    if not (isinstance(cls, type) and issubclass(cls, ZSLMethod)):
        raise TypeError(f"entry point {name!r} names {cls!r}, not a ZSLMethod subclass")
    register_zsl_method(cls)


#: Every zero-shot method class, by name, listed in the paper's table order; other packages add
#: theirs through the ``semshift.zsl_methods`` entry-point group.
ZSL_METHODS: Registry[type[ZSLMethod]] = Registry(
    "zero-shot method",
    entry_points="semshift.zsl_methods",
    order=lambda name, cls: cls.order,
    loader=_load_all,
    adopt=_adopt,
)


def register_zsl_method(cls: M) -> M:
    """Class decorator: register a :class:`ZSLMethod` subclass under its ``name``.

    Raises
    ------
    DuplicateNameError
        The name is registered already (an InputError, so also a ValueError).
    """
    ZSL_METHODS.add(cls.name, cls)
    return cls


def list_zsl_methods() -> list[str]:
    """Registered method names in the paper's table order."""
    return ZSL_METHODS.names()


def get_zsl_method(name: str) -> type[ZSLMethod]:
    """The method class registered as ``name`` (case-insensitive).

    Raises
    ------
    UnknownNameError
        No such method; the message lists close matches and every known name.
    """
    key = str(name).lower()
    if key not in ZSL_METHODS:
        raise unknown_name("zero-shot method", name, ZSL_METHODS)
    return ZSL_METHODS[key]


def __getattr__(name: str) -> Any:
    if name in ("Interval", "Choice"):
        import warnings

        from semshift.training.zsl import _legacy_constraints

        warnings.warn(
            f"semshift.training.zsl.registry.{name} is deprecated: zero-shot methods declare "
            "their constraints with semshift.params (Interval, StrOptions, Boolean)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_legacy_constraints, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
