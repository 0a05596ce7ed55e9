"""The demo's answer to SSB Table 1: CE, ARPL+CS, LogitNorm and OE trained on the glyphs.

:func:`ssb_table1` trains every method of a :class:`Table1Config` with every seed on the
demo's glyph data (:func:`~semshift.demo.build_demo_data`, built or reused under
``<out>/data``), extracts logits and features of the ID test images and the Easy and Hard
open-set images into feature stores, scores them and reports the layout of Vaze et al.'s
Table 1: closed-set accuracy, AUROC Easy / Hard and OSCR Easy / Hard per method.

Design (what the numbers are):

- **Scores.** Each method is scored the way its paper scores it (:data:`SCORES`): CE with the
  maximum logit (MLS), as the SSB paper does; ARPL+CS with the largest distance logit to the
  reciprocal points (detector ``arpl``); LogitNorm with the maximum softmax probability
  (MSP; Wei et al.'s evaluation, ``test.py --score MSP`` of their code) and Outlier Exposure
  with MSP too (Hendrycks et al.'s detector for the vision experiments). A config may name
  another detector per method (``scores:``), among those that need no fitting.
- **Seeds.** Every value is the mean over the training seeds; the tidy CSV also holds each
  seed's value and the standard deviation over seeds.
- **Confidence intervals** (percentile bootstrap, :func:`semshift.metrics.bootstrap_ci`):
  the test images are resampled, ID and open-set images separately (stratified), and the
  statistic of a resample is the *mean over seeds* of the metric, every seed's model scored on
  the same resampled images. The bootstrap seed is the same for every method, so every method
  sees the same resamples (a paired bootstrap). The interval is about the test images, with
  the trained models held fixed: with three seeds, resampling seeds would say little, so the
  spread over seeds is reported beside it (``seed_sd``), not folded in.
- **DeLong tests** (:func:`semshift.metrics.delong_mean_test`): each method's seed-mean AUROC
  against CE + MLS's, on the same test images (the pairing unit is the image; seed r of a
  method is paired with seed r of CE). The CSV also holds each seed's own DeLong test
  (:func:`semshift.metrics.delong_test`). CE + MLS against itself gives z = 0, p = 1.
- **OSCR** is the exact area (:func:`semshift.metrics.oscr`, ``variant="exact"``), as the
  ``osr`` protocol reports it.
- **Outlier Exposure's auxiliary set**: glyph characters that are neither ID classes nor in
  any bin of the demo's split (Easy, Medium, Hard) nor excluded homoglyphs, drawn with the data
  seed round-robin over the taxonomy groups (so some share a script or block with a test
  class, as 80 Million Tiny Images shares super-classes with CIFAR's test sets), rendered like
  the other sets and checked against the split manifest with the leak checker of
  :mod:`semshift.training.outliers` before training; a config that names its outlier
  characters is checked the same way, and a test class among them is an error.

Files under ``<out>/ssb_table1/``: ``runs/<method>-seed<s>-<key>/`` (a ``semshift train``
folder; in its ``eval/`` the model's ``semshift run`` over the ID test and open-set images, which
extracts and scores them through the run's cache), ``outliers/`` (class folders),
``table1.csv`` (tidy),
``table1.md``, ``table1.html`` and ``table1.json`` (configuration, timings). A re-run reuses
every finished training run and store (the folder key hashes the training configuration and the
data's fingerprint; an interrupted run resumes from its last epoch).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.demo.build import DemoData, DemoParams, build_demo_data
from semshift.errors import InputError, SemshiftError

__all__ = [
    "LABELS",
    "SCORES",
    "ScoredRun",
    "Table1Config",
    "Table1Result",
    "evaluate_table1",
    "read_table1_config",
    "ssb_table1",
    "table1_table",
]

#: Open-set splits of the table, in column order (the demo's ``ood_<split>`` sets).
SPLITS: tuple[str, ...] = ("easy", "hard")
#: The reference of the DeLong tests.
BASELINE = "ce"
#: Training method -> the detector its paper scores it with (see the module docstring).
SCORES: dict[str, str] = {
    "ce": "mls",
    "arpl": "arpl",
    "arpl_cs": "arpl",
    "logitnorm": "msp",
    "oe": "msp",
}
#: Display names of the training methods.
LABELS: dict[str, str] = {
    "ce": "CE",
    "arpl": "ARPL",
    "arpl_cs": "ARPL+CS",
    "logitnorm": "LogitNorm",
    "oe": "OE",
}
#: The recipe for 32 x 32 glyphs: a single cosine cycle (no restarts in a few epochs), no
#: horizontal flip (a mirrored glyph is another character: an arrow turns round), light
#: RandAugment beside the data's own shift / rotation / scale.
GLYPH_RECIPE: dict[str, Any] = {
    "epochs": 5,
    "batch_size": 64,
    "lr": 0.05,
    "num_restarts": 0,
    "randaugment_n": 1,
    "randaugment_m": 9,
    "flip": False,
    "crop_padding": 2,
}
#: Method hyperparameters that differ from the methods' defaults: ARPL+CS's GAN at 8 width
#: units (64, OpenOOD's, is 30x GlyphNet's cost per image; see ARPLConfusingSamples).
GLYPH_METHOD_PARAMS: dict[str, dict[str, Any]] = {"arpl_cs": {"ngf": 8, "ndf": 8}}
_EXTRACT_PRESET = "resize32-crop32"
_FORMAT = 1  # bump when a run folder's layout changes


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


@dataclass(frozen=True)
class Table1Config:
    """What :func:`ssb_table1` trains and how it reports (defaults live here).

    Parameters
    ----------
    methods : tuple of str
        Training methods (:func:`semshift.training.methods.list_methods`); ``ce`` must be one
        (the DeLong reference). Default CE, ARPL+CS, LogitNorm, OE.
    seeds : tuple of int
        Training seeds (0, 1, 2).
    method_params : dict
        Method -> hyperparameters over the method's defaults (default: ARPL+CS's GAN at 8 width
        units, :data:`GLYPH_METHOD_PARAMS`).
    scores : dict
        Method -> detector, over :data:`SCORES`.
    recipe : dict
        :class:`~semshift.training.recipe.Recipe` knobs over :data:`GLYPH_RECIPE`.
    data : dict
        :class:`~semshift.demo.DemoParams` fields over the demo's defaults (sizes of the glyph
        data).
    outlier_classes : int or tuple of str
        OE's auxiliary classes: how many to draw (48), or the characters (``U+2200`` or the
        character itself).
    outlier_images : int
        Images per outlier class (20).
    n_resamples, level, bootstrap_seed : bootstrap settings (1000, 0.95, 0)
    threads : int or None
        torch threads while training; the weights are bit-identical for the same seed and
        thread count. Default 1 (None: one per idle core).
    batch_size : int
        Images per forward pass of the extraction (256).
    """

    methods: tuple[str, ...] = ("ce", "arpl_cs", "logitnorm", "oe")
    seeds: tuple[int, ...] = (0, 1, 2)
    method_params: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {k: dict(v) for k, v in GLYPH_METHOD_PARAMS.items()}
    )
    scores: dict[str, str] = field(default_factory=dict)
    recipe: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    outlier_classes: int | tuple[str, ...] = 48
    outlier_images: int = 20
    n_resamples: int = 1000
    level: float = 0.95
    bootstrap_seed: int = 0
    threads: int | None = 1
    batch_size: int = 256

    def __post_init__(self) -> None:
        self.check()

    # ---------------------------------------------------------------- checks
    def check(self) -> None:
        """Raise :class:`InputError` (one line, naming the key) on the first bad value."""
        from semshift import detectors
        from semshift.training.methods import check_method_params, list_methods

        known = list_methods()
        if not self.methods or len(set(self.methods)) != len(self.methods):
            raise InputError(f"methods must be distinct method names, got {list(self.methods)}")
        for m in self.methods:
            if m not in known:
                raise InputError(
                    f"methods: unknown training method {m!r}; known: {', '.join(known)}"
                )
        if BASELINE not in self.methods:
            raise InputError("methods must include ce: every method is tested against CE + MLS")
        if not self.seeds or not all(_is_int(s) and s >= 0 for s in self.seeds):
            raise InputError(f"seeds must be a list of integers >= 0, got {list(self.seeds)}")
        if len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"seeds must be distinct, got {list(self.seeds)}")
        for key in ("method_params", "scores"):  # entries of methods not trained are unused
            for m in getattr(self, key):
                if m not in known:
                    raise InputError(
                        f"{key}: unknown training method {m!r}; known: {', '.join(known)}"
                    )
        for m, params in self.method_params.items():
            if not isinstance(params, Mapping):
                raise InputError(f"method_params: {m} must map names to values, got {params!r}")
            try:
                check_method_params(m, params)
            except SemshiftError as err:
                raise InputError(f"method_params: {err}") from None
        for m in self.methods:
            name = self.score_of(m)
            try:
                det = detectors.get(name)
            except SemshiftError as err:
                raise InputError(f"scores: {err}") from None
            if det.fit_requires:
                raise InputError(
                    f"scores: detector {name} fits on {', '.join(sorted(det.fit_requires))}; "
                    "the table scores with detectors that need no fitting"
                )
        self.train_recipe()
        self.demo_params()
        oc = self.outlier_classes
        if isinstance(oc, tuple):
            if not oc or not all(isinstance(c, str) and c for c in oc):
                raise InputError(f"outlier_classes must be a count or characters, got {list(oc)}")
        elif not _is_int(oc) or oc < 1:
            raise InputError(f"outlier_classes must be a positive integer or a list, got {oc!r}")
        checks: list[tuple[str, Any, bool]] = [
            ("outlier_images", self.outlier_images, _is_int(self.outlier_images)
             and self.outlier_images >= 1),
            ("n_resamples", self.n_resamples, _is_int(self.n_resamples) and self.n_resamples >= 1),
            ("level", self.level, isinstance(self.level, Real) and not isinstance(self.level, bool)
             and 0 < float(self.level) < 1),
            ("bootstrap_seed", self.bootstrap_seed, _is_int(self.bootstrap_seed)
             and self.bootstrap_seed >= 0),
            ("threads", self.threads, self.threads is None or (_is_int(self.threads)
             and self.threads >= 1)),
            ("batch_size", self.batch_size, _is_int(self.batch_size) and self.batch_size >= 1),
        ]  # fmt: skip
        for key, value, ok in checks:
            if not ok:
                raise InputError(f"{key} has a bad value {value!r}; see Table1Config")

    def score_of(self, method: str) -> str:
        """The detector that scores ``method``."""
        return self.scores.get(method, SCORES.get(method, "mls"))

    def label_of(self, method: str) -> str:
        """``CE + MLS``, ``ARPL+CS`` (the detector is named unless it is the method's own)."""
        score = self.score_of(method)
        base = LABELS.get(method, method)
        return (
            base if score == "arpl" and method.startswith("arpl") else f"{base} + {score.upper()}"
        )

    def train_recipe(self) -> Any:
        """The :class:`~semshift.training.recipe.Recipe` (:data:`GLYPH_RECIPE`, then ``recipe``)."""
        from semshift.training.recipe import Recipe

        try:
            return Recipe.from_dict({**GLYPH_RECIPE, **self.recipe})
        except SemshiftError as err:
            raise InputError(str(err)) from None

    def demo_params(self, base: DemoParams | None = None) -> DemoParams:
        """The glyph data's :class:`DemoParams`: ``base`` (the defaults), then ``data``."""
        base = base or DemoParams()
        names = [f.name for f in fields(DemoParams) if f.name != "augment"]
        values = dict(self.data)
        for key in values:
            if key not in names:
                raise InputError(f"data: unknown key {key!r}; known: {', '.join(names)}")
        if "id_groups" in values:
            groups = values["id_groups"]
            try:
                values["id_groups"] = tuple((str(g), int(k)) for g, k in groups)
            except (TypeError, ValueError):
                raise InputError(
                    f"data: id_groups must be a list of [group, count] pairs, got {groups!r}"
                ) from None
        if "font_families" in values:
            values["font_families"] = tuple(values["font_families"])
        params = replace(base, **values)
        params.check()
        return params

    @classmethod
    def from_dict(cls, data: Any, where: str = "table1 config") -> Table1Config:
        """A config from a parsed YAML mapping; every error names ``where`` and the key.

        Keys: those of this class, with ``bootstrap: {n_resamples, level, seed}`` and
        ``outliers: {classes, images_per_class}`` as groups; every key is optional.
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: expected a mapping of keys at the top level")
        simple = ("methods", "seeds", "method_params", "scores", "recipe", "data", "threads")
        groups = {"bootstrap": ("n_resamples", "level", "seed"),
                  "outliers": ("classes", "images_per_class"),
                  "extraction": ("batch_size",)}  # fmt: skip
        known = [*simple, *groups]
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise InputError(f"{where}: unknown key {key!r}; known: {', '.join(known)}")
            if key in groups:
                if not isinstance(value, Mapping):
                    raise InputError(f"{where}: {key} must be a mapping, got {value!r}")
                for sub in value:
                    if sub not in groups[key]:
                        raise InputError(
                            f"{where}: unknown key {key}.{sub}; known: {', '.join(groups[key])}"
                        )
                target = {"seed": "bootstrap_seed", "classes": "outlier_classes",
                          "images_per_class": "outlier_images"}  # fmt: skip
                for sub, v in value.items():
                    values[target.get(str(sub), str(sub))] = v
            elif key in ("methods", "seeds"):
                if not isinstance(value, list):
                    raise InputError(f"{where}: {key} must be a list, got {value!r}")
                values[key] = tuple(value)
            elif key in ("method_params", "scores", "recipe", "data"):
                if not isinstance(value, Mapping):
                    raise InputError(f"{where}: {key} must be a mapping, got {value!r}")
                values[key] = dict(value)
            else:
                values[key] = value
        if isinstance(values.get("outlier_classes"), list):
            values["outlier_classes"] = tuple(values["outlier_classes"])
        if "method_params" in values:
            values["method_params"] = {
                k: dict(v) if isinstance(v, Mapping) else v
                for k, v in values["method_params"].items()
            }
        try:
            return cls(**values)
        except SemshiftError as err:
            raise InputError(f"{where}: {err}") from None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["methods"], out["seeds"] = list(self.methods), list(self.seeds)
        if isinstance(self.outlier_classes, tuple):
            out["outlier_classes"] = list(self.outlier_classes)
        return out


def read_table1_config(path: str | Path) -> Table1Config:
    """The :class:`Table1Config` of a YAML file (``examples/configs/demo/ssb_table1.yaml``).

    Raises
    ------
    InputError
        Unreadable file, invalid YAML, a key given twice, an unknown key or a bad value: one
        line naming the file.
    """
    from semshift.textio import read_yaml

    return Table1Config.from_dict(read_yaml(path, "table1 config"), str(path))


# --------------------------------------------------------------------------- evaluation
@dataclass
class ScoredRun:
    """One trained model's scores on the test images.

    Attributes
    ----------
    method : str
    seed : int
    score : str
        The detector.
    id_scores : ndarray (n_id,)
        Normality scores of the ID test images (higher = more ID).
    id_correct : ndarray of bool (n_id,)
        Closed-set prediction correct.
    ood_scores : dict of str to ndarray
        Split -> normality scores of its open-set images (the same images for every run).
    """

    method: str
    seed: int
    score: str
    id_scores: NDArray[np.float64]
    id_correct: NDArray[np.bool_]
    ood_scores: dict[str, NDArray[np.float64]]


RESULT_COLUMNS = (
    "method", "label", "score", "kind", "seed", "split", "metric", "value", "ci_low", "ci_high",
    "seed_sd", "n_id", "n_ood", "delong_z", "delong_p",
)  # fmt: skip


def evaluate_table1(
    runs: Sequence[ScoredRun],
    *,
    labels: Mapping[str, str] | None = None,
    reference: str = BASELINE,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """The tidy table: accuracy, AUROC and OSCR per method, seed and split, and their means.

    Rows with ``kind == "seed"`` hold one seed's value (and that seed's DeLong test against
    ``reference`` for AUROC); rows with ``kind == "mean"`` the mean over seeds, its bootstrap
    CI (``ci_low``, ``ci_high``), the standard deviation over seeds (``seed_sd``, ddof 1; NaN
    for one seed) and the DeLong test of the mean AUROCs. See the module docstring for the
    resampling scheme.

    Parameters
    ----------
    runs : sequence of ScoredRun
        Every method with the same seeds and the same test images.
    labels : mapping, optional
        Method -> display label.
    reference : str
        The method every AUROC is tested against.
    n_resamples, level, seed : bootstrap settings (``n_resamples=0``: no CIs)

    Raises
    ------
    InputError
        No runs, the reference missing, unequal seeds or image counts between methods.
    """
    from semshift.metrics import auroc, bootstrap_ci, delong_mean_test, delong_test, oscr

    if not runs:
        raise InputError("evaluate_table1: no runs")
    methods = list(dict.fromkeys(r.method for r in runs))
    by: dict[str, dict[int, ScoredRun]] = {m: {} for m in methods}
    for r in runs:
        by[r.method][int(r.seed)] = r
    seeds = sorted(by[methods[0]])
    if reference not in by:
        raise InputError(f"evaluate_table1: the reference {reference!r} has no runs")
    for m in methods:
        if sorted(by[m]) != seeds:
            raise InputError(
                f"evaluate_table1: {m} has seeds {sorted(by[m])}, {methods[0]} {seeds}"
            )
    first = runs[0]
    splits = list(first.ood_scores)
    for r in runs:
        if (
            len(r.id_scores) != len(first.id_scores)
            or list(r.ood_scores) != splits
            or any(len(r.ood_scores[s]) != len(first.ood_scores[s]) for s in splits)
        ):
            raise InputError(
                f"evaluate_table1: {r.method} seed {r.seed} was scored on other test images"
            )
    labels = dict(labels or {})
    n_id = len(first.id_scores)
    rows: list[dict[str, Any]] = []

    def base(m: str) -> dict[str, Any]:
        return {"method": m, "label": labels.get(m, m), "score": by[m][seeds[0]].score}

    def ci(stat: Callable[..., float], *arrays: Any, stratify: Any = "auto") -> tuple[float, float]:
        if n_resamples < 1:
            return math.nan, math.nan
        res = bootstrap_ci(stat, *arrays, n_resamples=int(n_resamples), level=level,
                           stratify=stratify, seed=seed)  # fmt: skip
        return res.low, res.high

    for m in methods:
        correct = np.stack([by[m][s].id_correct for s in seeds], axis=1)  # (n_id, S)
        accs = correct.mean(axis=0)
        for s, a in zip(seeds, accs, strict=True):
            rows.append({**base(m), "kind": "seed", "seed": s, "split": "id",
                         "metric": "accuracy", "value": float(a), "n_id": n_id})  # fmt: skip
        low, high = ci(lambda c: float(c.mean()), correct, stratify=None)
        rows.append({**base(m), "kind": "mean", "split": "id", "metric": "accuracy",
                     "value": float(accs.mean()), "ci_low": low, "ci_high": high,
                     "seed_sd": _sd(accs), "n_id": n_id})  # fmt: skip
        for split in splits:
            n_ood = len(first.ood_scores[split])
            is_ood = np.r_[np.zeros(n_id, bool), np.ones(n_ood, bool)]
            sc = np.stack(
                [np.r_[by[m][s].id_scores, by[m][s].ood_scores[split]] for s in seeds], axis=0
            )  # (S, n)
            ref = np.stack(
                [np.r_[by[reference][s].id_scores, by[reference][s].ood_scores[split]]
                 for s in seeds], axis=0,
            )  # fmt: skip
            cor = np.stack([np.r_[by[m][s].id_correct, np.zeros(n_ood, bool)] for s in seeds])
            per_auroc = [auroc(sc[k], is_ood) for k in range(len(seeds))]
            per_oscr = [oscr(sc[k], is_ood, cor[k]) for k in range(len(seeds))]
            for k, s in enumerate(seeds):
                dl = delong_test(sc[k], ref[k], is_ood)
                common = {**base(m), "kind": "seed", "seed": s, "split": split, "n_id": n_id,
                          "n_ood": n_ood}  # fmt: skip
                rows.append({**common, "metric": "auroc", "value": per_auroc[k],
                             "delong_z": dl.z, "delong_p": dl.p})  # fmt: skip
                rows.append({**common, "metric": "oscr", "value": per_oscr[k]})
            dl = delong_mean_test(sc, ref, is_ood)
            a_low, a_high = ci(_seed_mean_auroc, sc.T, is_ood, cor.T)
            o_low, o_high = ci(_seed_mean_oscr, sc.T, is_ood, cor.T)
            common = {**base(m), "kind": "mean", "split": split, "n_id": n_id, "n_ood": n_ood}
            rows.append({**common, "metric": "auroc", "value": float(np.mean(per_auroc)),
                         "ci_low": a_low, "ci_high": a_high, "seed_sd": _sd(per_auroc),
                         "delong_z": dl.z, "delong_p": dl.p})  # fmt: skip
            rows.append({**common, "metric": "oscr", "value": float(np.mean(per_oscr)),
                         "ci_low": o_low, "ci_high": o_high, "seed_sd": _sd(per_oscr)})  # fmt: skip
    frame = pd.DataFrame(rows).reindex(columns=list(RESULT_COLUMNS))
    frame["seed"] = frame["seed"].astype("Int64")
    frame["n_ood"] = frame["n_ood"].astype("Int64")
    return frame


def _seed_mean_auroc(
    scores: NDArray[np.float64], is_ood: NDArray[np.bool_], correct: NDArray[np.bool_]
) -> float:
    """Mean over the columns (seeds) of ``scores`` (n, S) of the AUROC."""
    from semshift.metrics import auroc

    return float(np.mean([auroc(scores[:, k], is_ood) for k in range(scores.shape[1])]))


def _seed_mean_oscr(
    scores: NDArray[np.float64], is_ood: NDArray[np.bool_], correct: NDArray[np.bool_]
) -> float:
    """Mean over the columns (seeds) of ``scores`` (n, S) of the OSCR (exact)."""
    from semshift.metrics import oscr

    k = scores.shape[1]
    return float(np.mean([oscr(scores[:, j], is_ood, correct[:, j]) for j in range(k)]))


def _sd(values: Sequence[float] | NDArray[np.float64]) -> float:
    v = np.asarray(values, dtype=np.float64)
    return float(v.std(ddof=1)) if v.size > 1 else math.nan


def table1_table(results: pd.DataFrame, *, ci: bool = True) -> Any:
    """SSB Table 1's layout of :func:`evaluate_table1`'s results as a
    :class:`semshift.report.tables.Table` (:func:`semshift.report.study_tables.ssb_seed_table`,
    the reference CE + MLS).

    Rows: methods (with their score); columns: Acc, AUROC Easy / Hard, OSCR Easy / Hard (x100,
    mean over seeds with the bootstrap CI), then the DeLong p-value of each AUROC against the
    reference (CE + MLS, whose own p is 1).
    """
    from semshift.report.study_tables import ssb_seed_table

    return ssb_seed_table(
        results, reference=BASELINE, key="ssb_table1", title="The glyph demo's SSB Table 1", ci=ci
    )


# --------------------------------------------------------------------------- the run
@dataclass
class Table1Result:
    """What :func:`ssb_table1` produced.

    Attributes
    ----------
    results : DataFrame
        The tidy table (:func:`evaluate_table1`).
    table : semshift.report.tables.Table
        SSB Table 1's layout.
    root : Path
        ``<out>/ssb_table1``.
    files : dict of str to Path
        ``csv``, ``md``, ``html``, ``json``.
    data : DemoData
    outlier_classes : list of str
        OE's auxiliary characters (empty without OE).
    timings : dict of str to float
        Seconds: ``data``, ``outliers``, ``train``, ``extract``, ``evaluate``, ``total``.
    trained : int
        Training runs this call trained (the others were reused).
    """

    results: pd.DataFrame
    table: Any
    root: Path
    files: dict[str, Path]
    data: DemoData
    outlier_classes: list[str]
    timings: dict[str, float]
    trained: int


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _outliers(
    data: DemoData, config: Table1Config, root: Path, seed: int
) -> tuple[Path, list[str]]:
    """Render OE's auxiliary classes into ``root/outliers`` (class folders) and leak-check them."""
    from semshift.demo._common import ID_FAMILY, choose_outlier_classes, render_set, save_pngs
    from semshift.demo.fonts import FAMILIES
    from semshift.demo.glyphs import inventory
    from semshift.features.data import open_source
    from semshift.training.outliers import check_outlier_classes

    glyphs = inventory(FAMILIES[ID_FAMILY])
    by_id = {g.id: g for g in glyphs}
    chosen = choose_outlier_classes(data, config.outlier_classes, glyphs, seed)
    folder = root / "outliers"
    key = _key({"classes": chosen, "n": config.outlier_images, "data": data.fingerprint,
                "seed": seed, "format": _FORMAT})  # fmt: skip
    marker = folder / "outliers.json"
    done = marker.is_file() and json.loads(marker.read_text(encoding="utf-8")).get("key") == key
    if not done:
        if folder.exists():
            shutil.rmtree(folder)
        chars = [by_id[c].char for c in chosen]
        imgs, labels, _, _ = render_set(
            chars, config.outlier_images, FAMILIES[ID_FAMILY], data.params, "outliers", seed
        )
        k = config.outlier_images
        save_pngs(imgs, [folder / chosen[lab] / f"{j % k:04d}.png" for j, lab in enumerate(labels)])
    check_outlier_classes(open_source(folder), [data.split_manifest], str(folder))
    if not done:
        marker.write_text(json.dumps({"key": key, "classes": chosen}) + "\n", encoding="utf-8")
    return folder, chosen


def ssb_table1(
    out: str | Path,
    *,
    config: Table1Config | None = None,
    seed: int = 0,
    params: DemoParams | None = None,
    device: str = "auto",
    progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> Table1Result:
    """Train, extract, score and tabulate SSB Table 1 on the glyph demo (see the module docs).

    Parameters
    ----------
    out : str or Path
        The demo folder: the glyph data go to ``<out>/data`` (reused when built with the same
        sizes and seed, e.g. by ``semshift demo``), everything else to ``<out>/ssb_table1``.
    config : Table1Config, optional
        Methods, seeds, recipe ...; default :class:`Table1Config()`.
    seed : int
        Seed of the glyph data (classes, images, outlier draw); the training seeds are the
        config's.
    params : DemoParams, optional
        Base sizes of the glyph data (default the demo's), under ``config.data``.
    device : str
        Training and extraction device (``auto``: CUDA when present).
    progress : bool
        Progress bars.
    log : callable, optional
        Called with a line after each stage and training run.

    Returns
    -------
    Table1Result

    Raises
    ------
    InputError
        Bad configuration, or outlier characters that are test classes (before any training).
    """
    from semshift.training.loop import train
    from semshift.training.recipe import TrainConfig

    config = config or Table1Config()
    say = log or (lambda _line: None)
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    demo_params = config.demo_params(params)
    recipe = config.train_recipe()
    out = Path(out)
    t = time.perf_counter()
    data = build_demo_data(out, seed=seed, params=demo_params, progress=progress)
    timings["data"] = time.perf_counter() - t
    say(f"glyph data {'reused' if data.cached else 'built'} in {timings['data']:.1f} s "
        f"({data.num_classes} ID characters)")  # fmt: skip
    root = out / "ssb_table1"
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    outlier_dir: Path | None = None
    outlier_ids: list[str] = []
    if any(_uses_outliers(m) for m in config.methods):
        outlier_dir, outlier_ids = _outliers(data, config, root, seed)
        say(f"{len(outlier_ids)} outlier classes x {config.outlier_images} images, leak-checked "
            "against the split")  # fmt: skip
    timings["outliers"] = time.perf_counter() - t

    # ---- train
    t = time.perf_counter()
    trained = 0
    run_dirs: dict[tuple[str, int], Path] = {}
    for m in config.methods:
        for s in config.seeds:
            oe = _uses_outliers(m)
            cfg = TrainConfig(
                model=data.model_name, data=str(data.sets["id_train"].path),
                classes=str(data.classes_path), method=m,
                method_params=dict(config.method_params.get(m, {})), recipe=recipe, seed=int(s),
                num_classes=data.num_classes, preset=_EXTRACT_PRESET,
                outliers=str(outlier_dir) if oe else None,
                test_splits=[str(data.split_manifest)] if oe else [],
            )  # fmt: skip
            key = _key({"config": cfg.to_dict(), "data": data.fingerprint,
                        "outliers": outlier_ids if oe else None, "threads": config.threads,
                        "format": _FORMAT})  # fmt: skip
            run = root / "runs" / f"{m}-seed{s}-{key}"
            run_dirs[(m, int(s))] = run
            if (run / "model.safetensors").is_file():
                continue
            t_run = time.perf_counter()
            res = train(cfg, run, resume=True, device=device, threads=config.threads,
                        progress=progress)  # fmt: skip
            trained += 1
            last = res.history[-1] if res.history else {}
            say(f"trained {config.label_of(m)} seed {s}: {len(res.history)} epochs in "
                f"{time.perf_counter() - t_run:.1f} s, training accuracy "
                f"{100 * last.get('accuracy', math.nan):.1f} %")  # fmt: skip
    timings["train"] = time.perf_counter() - t

    # ---- extract and score: one run of semshift.run per model
    t = time.perf_counter()
    runs = _evaluate_models(data, run_dirs, config, device, progress)
    timings["extract"] = time.perf_counter() - t
    say(
        f"features and scores of {len(run_dirs)} models x {1 + len(SPLITS)} sets in "
        f"{timings['extract']:.1f} s"
    )

    # ---- evaluate
    t = time.perf_counter()
    results = evaluate_table1(
        runs, labels={m: config.label_of(m) for m in config.methods}, reference=BASELINE,
        n_resamples=config.n_resamples, level=config.level, seed=config.bootstrap_seed,
    )  # fmt: skip
    table = table1_table(results)
    timings["evaluate"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t_all
    files = _write(root, results, table, config, data, seed, outlier_ids, timings, trained)
    return Table1Result(results, table, root, files, data, outlier_ids, timings, trained)


def _uses_outliers(method: str) -> bool:
    from semshift.training.methods import METHODS

    return bool(METHODS[method].uses_outliers)


def _evaluate_models(
    data: DemoData,
    run_dirs: Mapping[tuple[str, int], Path],
    config: Table1Config,
    device: str,
    progress: bool,
) -> list[ScoredRun]:
    """Each trained model through :func:`semshift.run.run` (``<run>/eval``): its ID test and
    open-set images extracted into the run's cache and scored by the method's detector (no
    training data: the table's detectors need no fitting); the scores read back from the
    run's ``scores/<set>.parquet``.

    A re-run reuses every cached store and score. A cached store that no longer verifies
    (damaged on disk) makes that model's run start again from its images."""
    from semshift.run import run

    sets = {s: {"role": "ood", "split": s, "images": str(data.sets[f"ood_{s}"].path)}
            for s in SPLITS}  # fmt: skip
    out = []
    for (method, seed), folder in run_dirs.items():
        score = config.score_of(method)
        cfg = {
            "name": f"{method}-seed{seed}",
            "output": str(folder / "eval"),
            "classes": str(data.classes_path),
            "model": {"name": data.model_name, "weights": str(folder / "model.safetensors"),
                      "num_classes": data.num_classes, "preset": _EXTRACT_PRESET,
                      "batch_size": config.batch_size, "device": device},
            "data": {"id_test": {"images": str(data.sets["id_test"].path)}, "sets": sets},
            "detectors": [score],
            "bootstrap": {"n_resamples": 0},
        }  # fmt: skip
        try:
            result = run(cfg, progress=progress)
        except InputError as err:  # a damaged cached store: extracted again, not used
            if "damaged" not in str(err) and "checksum" not in str(err):
                raise
            result = run(cfg, progress=progress, force=True)
        scores = {
            name: pd.read_parquet(result.output / "scores" / f"{name}.parquet")
            for name in ("id_test", *SPLITS)
        }
        col = f"score:{score}"
        id_table = scores["id_test"]
        out.append(
            ScoredRun(
                method,
                int(seed),
                score,
                id_table[col].to_numpy(np.float64),
                (id_table["pred"] == id_table["label"]).to_numpy(),
                {s: scores[s][col].to_numpy(np.float64) for s in SPLITS},
            )
        )
    return out


def _write(
    root: Path,
    results: pd.DataFrame,
    table: Any,
    config: Table1Config,
    data: DemoData,
    seed: int,
    outlier_ids: list[str],
    timings: dict[str, float],
    trained: int,
) -> dict[str, Path]:
    files = {k: root / f"table1.{k}" for k in ("csv", "md", "html", "json")}
    results.to_csv(files["csv"], index=False)
    recipe = asdict(config.train_recipe())
    setup = (
        f"{data.num_classes} ID glyph classes x {data.params.n_train} training images; "
        f"{data.sets['id_test'].n_images} ID test images, "
        + ", ".join(f"{data.sets[f'ood_{s}'].n_images} {s.capitalize()}" for s in SPLITS)
        + f" open-set images; GlyphNet trained {recipe['epochs']} epochs (batch "
        f"{recipe['batch_size']}, lr {recipe['lr']}) per method and seed "
        f"({', '.join(map(str, config.seeds))})"
        + (f"; OE with {len(outlier_ids)} outlier characters x {config.outlier_images} images"
           if outlier_ids else "")
        + "."
    )  # fmt: skip
    from semshift.report.blocks import Paragraph, Report, Section
    from semshift.report.html import render_html
    from semshift.report.markdown import render_markdown

    doc = Report(
        title=table.title, intro=Paragraph(setup), figures=[], timings={},
        sections=[Section("ssb-table1", "SSB Table 1", [table])],
    )  # fmt: skip
    files["md"].write_text(render_markdown(doc, root), encoding="utf-8")
    files["html"].write_text(render_html(doc), encoding="utf-8")
    meta = {
        "config": config.to_json(),
        "recipe": recipe,
        "data_seed": seed,
        "data_fingerprint": data.fingerprint,
        "outlier_classes": outlier_ids,
        "timings": timings,
        "trained_this_call": trained,
    }
    files["json"].write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return files
