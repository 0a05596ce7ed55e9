"""Build the offline demo: glyph images, taxonomy, SSB split, homoglyph report and a trained CNN.

:func:`build_demo_data` writes everything under ``<workdir>/data`` and returns a
:class:`DemoData`; a second call with the same parameters, seed and package versions finds the
fingerprint in ``data/demo.json`` and returns at once.

What is built (sizes are the :class:`DemoParams` defaults):

1. **Taxonomy** (``taxonomy.csv``): every character of five scripts and three symbol blocks that
   the four DejaVu Sans styles cover (786), under glyph -> letter -> script -> case and
   glyph -> symbol -> block (:mod:`semshift.demo.glyphs`), loaded back with
   :func:`semshift.taxonomy.load_taxonomy` like any user's file.
2. **ID classes** (``classes.txt``, 48): 12 each of Latin capitals, Greek small letters, arrows and
   geometric shapes, drawn with the seed among the characters every covariate font family also
   covers, skipping any character pixel-near one already chosen (so the closed set has no
   homoglyph pair).
3. **Homoglyphs** (``homoglyphs.csv``): every other character whose canonical rendering is
   pixel-near an ID character's (mean :func:`~semshift.demo.render.glyph_distance` over the four
   DejaVu Sans styles below ``homoglyph_threshold``: Greek Alpha and Cyrillic A next to Latin A
   are at 0.0). They are excluded from the open-set candidates, because an image that is pixel-
   identical to a known class cannot be detected as new by any detector; the file lists each with
   its nearest ID character, distance and the bin it would have fallen in.
4. **Split** (``split/split.json``, ``audit.csv``, ``summary.csv``):
   :func:`semshift.splits.ssb.build_ssb_split` with the ``hierarchy`` preset (the SSB's FGVC rule:
   Hard = same parent as a known class, i.e. same script and case or same symbol block;
   Medium = same grandparent, i.e. the other case of a known script or another symbol block;
   Easy = the rest, i.e. other scripts), then ``restrict_to`` the classes rendered: up to
   ``ood_classes`` per bin, drawn with the seed round-robin over the parent groups.
5. **Images** (``images/<set>/``, 32 x 32 grayscale PNG, black on white): ID train / val / test as
   class folders (``U+XXXX/0000.png``), styles cycling through DejaVu Sans Regular, Bold,
   Oblique, Bold Oblique, with light seeded augmentation (shift, rotation, scale); ``ood_easy``,
   ``ood_medium``, ``ood_hard`` as class folders of the open-set characters (not in the class
   list, so label -1; the folder names each image's true class, which the report's gallery
   names and a search's leak check needs) in the same fonts and augmentation;
   ``font_<family>``: the ID classes in DejaVu Serif, DejaVu Sans Mono and STIX (covariate shift).
   Corruptions are not pre-rendered: :meth:`DemoData.config` asks the runner to apply
   :mod:`semshift.features.corruptions` at extraction (``corruption:``).
6. **Model** (``glyphnet.safetensors``): :class:`~semshift.demo.model.GlyphNet` trained on
   ``id_train`` (CPU, seeded); ``demo.json`` records its ID test accuracy and the accuracy per font
   family.

Also ``images/<set>.csv`` per set: each image's path, class, character, font file and
augmentation parameters.

Sizes (defaults): 48 ID classes x 60 / 10 / 20 train / val / test images; 24 open-set classes x
10 images per bin; 10 images per ID class and covariate font family; 6,480 images in all.

Same seed -> byte-identical PNG files and identical weights, whatever the thread count, the load
or the parent process's torch settings: training runs in a child process with its arithmetic
pinned (:func:`~semshift.demo.model.train_pinned`); ``demo.json`` records how
(``train_numerics``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift import __version__
from semshift.demo._common import (
    ID_FAMILY,
    Progress,
    choose_id_classes,
    render_set,
    sample_bin,
    save_pngs,
    seeded_rng,
)
from semshift.demo.fonts import FAMILIES, Font, covered, get_family
from semshift.demo.glyphs import SCRIPTS, SYMBOL_BLOCKS, Glyph, inventory, write_taxonomy
from semshift.demo.model import MODEL_NAME, PRESET, predict, train_pinned
from semshift.demo.render import Augment, canonical, mean_distance
from semshift.errors import InputError
from semshift.splits.ssb import ssb_bin_level

__all__ = [
    "BINS",
    "DEMO_LISTED_LAST",
    "DEMO_MODEL_LEVEL",
    "DemoData",
    "DemoParams",
    "DemoSet",
    "build_demo_data",
]

#: Open-set bins, with the semantic level each gets on the graded grid (1 = nearest the known
#: classes in the taxonomy = least semantic shift).
BINS: dict[str, int] = {b: ssb_bin_level(b) for b in ("hard", "medium", "easy")}
_FORMAT = 3  # bump when the on-disk layout or the training changes (2: pinned numerics, 3: OOD
# images in class folders)


#: The model-level detectors of the default demo run (``semshift demo --all-detectors`` runs
#: every registered one): cheap per image, none fitted on the training images.
DEMO_MODEL_LEVEL = ("mc_dropout", "odin", "rankfeat")
#: Post-hoc detectors the demo lists after the other post-hoc ones, where they stood when they
#: were model-level (lts), so the demo's configuration and report keep their row order.
DEMO_LISTED_LAST = ("lts",)


@dataclass(frozen=True)
class DemoParams:
    """Sizes and settings of the demo data (all part of the cache fingerprint).

    Attributes
    ----------
    id_groups : tuple of (group id, count)
        ID classes drawn from each taxonomy group.
    n_train, n_val, n_test : int
        Images per ID class in each ID set.
    ood_classes : int
        Open-set classes rendered per bin (fewer when the bin is smaller).
    n_ood : int
        Images per open-set class.
    n_font : int
        Images per ID class in each covariate font family.
    font_families : tuple of str
        Covariate font families (:data:`~semshift.demo.fonts.FAMILIES` keys).
    font_size : int
        Nominal glyph size in pixels on the 32 x 32 canvas.
    augment : Augment
        Ranges of the shift / rotation / scale augmentation.
    homoglyph_threshold : float
        Mean glyph distance below which two characters count as pixel-near.
    epochs, batch_size, lr : training settings
    """

    id_groups: tuple[tuple[str, int], ...] = (
        ("latin-capital", 12),
        ("greek-small", 12),
        ("arrows", 12),
        ("geometric-shapes", 12),
    )
    n_train: int = 60
    n_val: int = 10
    n_test: int = 20
    ood_classes: int = 24
    n_ood: int = 10
    n_font: int = 10
    font_families: tuple[str, ...] = ("dejavu-serif", "dejavu-sans-mono", "stix")
    font_size: int = 22
    augment: Augment = field(default_factory=Augment)
    homoglyph_threshold: float = 0.12
    epochs: int = 4
    batch_size: int = 128
    lr: float = 4e-3

    def check(self) -> None:
        """Raise :class:`InputError` naming the first invalid field."""
        counts = {
            "n_train": self.n_train, "n_val": self.n_val, "n_test": self.n_test,
            "ood_classes": self.ood_classes, "n_ood": self.n_ood, "n_font": self.n_font,
            "epochs": self.epochs, "batch_size": self.batch_size, "font_size": self.font_size,
        }  # fmt: skip
        for key, value in counts.items():
            if not isinstance(value, int) or value < 1:
                raise InputError(f"DemoParams.{key} must be a positive integer, got {value!r}")
        if not self.id_groups or any(k < 1 for _, k in self.id_groups):
            raise InputError(f"DemoParams.id_groups needs positive counts, got {self.id_groups}")
        known = [f"{sc}-{case}" for sc in SCRIPTS for case in ("capital", "small")]
        known += list(SYMBOL_BLOCKS)
        for group, _ in self.id_groups:
            if group not in known:
                raise InputError(
                    f"DemoParams.id_groups: unknown group {group!r}; known: {', '.join(known)}"
                )
        groups = [g for g, _ in self.id_groups]
        if len(set(groups)) != len(groups):
            raise InputError(f"DemoParams.id_groups names a group twice: {groups}")
        a = self.augment
        if not 0 <= a.shift <= 8 or a.rotate < 0 or not 0 < a.scale[0] <= a.scale[1]:
            raise InputError(
                "DemoParams.augment: need 0 <= shift <= 8, rotate >= 0 and "
                f"0 < scale[0] <= scale[1], got {a}"
            )
        if self.font_size < 8:
            raise InputError(f"DemoParams.font_size must be >= 8 pixels, got {self.font_size}")
        for fam in self.font_families:
            if fam not in FAMILIES:
                raise InputError(
                    f"DemoParams.font_families: unknown font family {fam!r}; known: "
                    f"{', '.join(sorted(FAMILIES))}"
                )
        if ID_FAMILY in self.font_families:
            raise InputError(f"DemoParams.font_families: {ID_FAMILY} is the ID font, not a shift")
        if not 0 < self.homoglyph_threshold < 1:
            raise InputError(
                f"DemoParams.homoglyph_threshold must be in (0, 1), got {self.homoglyph_threshold}"
            )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["id_groups"] = [list(g) for g in self.id_groups]
        out["augment"] = asdict(self.augment)
        return json.loads(json.dumps(out))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DemoParams:
        d = dict(data)
        d.pop("threads", None)  # demo.json of semshift < 0.27: training now always pinned
        d["id_groups"] = tuple((str(g), int(k)) for g, k in d["id_groups"])
        d["font_families"] = tuple(d["font_families"])
        aug = dict(d["augment"])
        aug["scale"] = tuple(aug["scale"])
        d["augment"] = Augment(**aug)
        return cls(**d)


@dataclass(frozen=True)
class DemoSet:
    """One image set on disk.

    Attributes
    ----------
    name : str
        ``id_train``, ``id_val``, ``id_test``, ``ood_<bin>`` or ``font_<family>``.
    path : Path
        The folder of class folders (for open-set images, folders of classes outside the class
        list).
    role : str
        ``id`` (ID train/val/test), ``ood`` (semantic shift) or ``covariate``.
    classes : list of str
        Character ids in the set (the ID classes for ``id`` and ``covariate`` sets).
    n_images : int
    split : str, optional
        Open-set bin (``easy``, ``medium``, ``hard``).
    semantic_level : int, optional
        :data:`BINS` level of an open-set bin.
    fonts : list of str
        Font keys used (``dejavu-sans-bold`` ...).
    """

    name: str
    path: Path
    role: str
    classes: list[str]
    n_images: int
    split: str | None = None
    semantic_level: int | None = None
    fonts: list[str] = field(default_factory=list)


@dataclass
class DemoData:
    """The built demo (see the module docstring); returned by :func:`build_demo_data`.

    Attributes
    ----------
    root : Path
        ``<workdir>/data``.
    taxonomy_path, classes_path, split_manifest, homoglyphs_path, weights_path : Path
    id_classes : list of str
        ID character ids (``U+0041``) in label order.
    id_names : list of str
        Their Unicode names.
    sets : dict of str to DemoSet
    model_name : str
        ``demo-glyphnet`` (registered on ``import semshift.demo``).
    preset : str
        Preprocessing preset (``resize32-crop32``).
    test_accuracy : float
        Closed-set accuracy on ``id_test``.
    font_accuracy : dict of str to float
        Accuracy on each ``font_<family>`` set.
    homoglyphs : pandas.DataFrame
        The excluded pixel-near characters (``homoglyphs.csv``).
    params : DemoParams
    seed : int
    fingerprint : str
    timings : dict of str to float
        Seconds per build step (of the run that built the data).
    cached : bool
        True when this call reused an earlier build.
    """

    root: Path
    taxonomy_path: Path
    classes_path: Path
    split_manifest: Path
    homoglyphs_path: Path
    weights_path: Path
    id_classes: list[str]
    id_names: list[str]
    sets: dict[str, DemoSet]
    model_name: str
    preset: str
    test_accuracy: float
    font_accuracy: dict[str, float]
    homoglyphs: pd.DataFrame
    params: DemoParams
    seed: int
    fingerprint: str
    timings: dict[str, float]
    cached: bool = False
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def num_classes(self) -> int:
        return len(self.id_classes)

    def summary(self) -> str:
        """A Markdown summary: ID classes, open-set bins, excluded homoglyphs, accuracy.

        Everything in it is read from the built data (for the README and the CLI).
        """
        from semshift.splits.manifest import SplitManifest

        def chars(ids: Sequence[str]) -> str:
            return " ".join(chr(int(i[2:], 16)) for i in ids)

        groups: dict[str, list[str]] = {}
        for cid, (group, _) in zip(self.id_classes, self._id_groups(), strict=True):
            groups.setdefault(group, []).append(cid)
        manifest = SplitManifest.read(self.split_manifest)
        lines = [
            f"**ID classes** ({self.num_classes}, rendered in DejaVu Sans Regular, Bold, "
            "Oblique and Bold Oblique):",
            "",
            *[f"- {g}: {chars(ids)}" for g, ids in groups.items()],
            "",
            "**Open-set bins** (SSB builder, hierarchy preset over the glyph taxonomy; "
            f"{self.params.ood_classes} classes x {self.params.n_ood} images each):",
            "",
            *[
                f"- {b.capitalize()} (semantic level {BINS[b]}): {chars(manifest.bins[b])}"
                for b in ("hard", "medium", "easy")
            ],
            "",
            f"**Homoglyphs excluded from the open set** ({len(self.homoglyphs)}; mean pixel "
            f"distance to an ID character below {self.params.homoglyph_threshold} over the four "
            "DejaVu Sans styles):",
            "",
            *[
                f"- {r.char} {r.name} ~ {r.nearest_id_char} {r.nearest_id_name} "
                f"(distance {r.distance:.3f}, would have been {r.bin})"
                for r in self.homoglyphs.itertuples()
            ],
            "",
            f"**{self.model_name}**: closed-set accuracy {100 * self.test_accuracy:.1f} % on the "
            "ID test set; on the ID characters in other fonts: "
            + ", ".join(f"{f} {100 * a:.1f} %" for f, a in self.font_accuracy.items())
            + ".",
        ]
        return "\n".join(lines) + "\n"

    def _id_groups(self) -> list[tuple[str, int]]:
        """(group, position) of each ID class, in label order."""
        out: list[tuple[str, int]] = []
        for group, count in self.params.id_groups:
            out.extend((group, k) for k in range(count))
        return out

    def load_model(self, *, random_init: bool = False, seed: int = 0) -> Any:
        """The trained GlyphNet adapter (or a seeded random-init copy)."""
        from semshift.features.models import load_model

        if random_init:
            return load_model(
                self.model_name, random_init=True, seed=seed, num_classes=self.num_classes
            )
        return load_model(self.model_name, weights=self.weights_path, num_classes=self.num_classes)

    def config(
        self,
        output_dir: str | Path,
        *,
        corruption: str = "pixelate",
        severities: Sequence[int] = (1, 3, 5),
        n_models: int = 3,
        delta: float = 0.05,
        detectors: str | list[Any] = "default",
        n_resamples: int = 1000,
        batch_size: int = 256,
        device: str = "auto",
        relative_to: str | Path | None = None,
    ) -> dict[str, Any]:
        """A runner configuration (``docs/design/run.md``) for this data.

        Sets (``data.sets``):

        - ``easy``, ``medium``, ``hard``: the open-set bins, role ``ood``, ``split`` = the bin,
          ``semantic_level`` = :data:`BINS` (hard 1, medium 2, easy 3), ``covariate_level`` 0.
        - ``<bin>_<corruption><s>`` for each severity s: the same images corrupted by the runner at
          extraction; ``semantic_level`` as the bin, ``covariate_level`` = s, no ``split`` (OSR
          pools only the clean bins). With the clean bins they fill the graded grid
          (3 semantic levels x 1 + len(severities) covariate levels).
        - ``font_<family>``: the ID classes in another font family, role ``covariate``.
        - ``<corruption><s>``: the ID test images corrupted, role ``covariate``,
          ``covariate_level`` = s.

        Parameters
        ----------
        output_dir : str or Path
            The run's output directory.
        corruption : str
            A :mod:`semshift.features.corruptions` name for the covariate axis. Default
            ``pixelate``: the ImageNet-C parameters assume 224 px images, and on these 32 px
            glyphs most corruptions destroy the class at severity 1. Closed-set accuracy of the
            default model (seed 0) on the ID test set at severities 1 / 3 / 5, as the runner
            applies them (RGB): pixelate 94 / 64 / 28 %, gaussian_noise 58 / 21 / 3 %, and on
            the grayscale image: brightness 99 / 81 / 20 %, jpeg 99 / 99 / 97 %, contrast
            26 / 7 / 5 %, gaussian_blur 50 / 6 / 5 %, defocus_blur 14 / 6 / 5 %.
        severities : sequence of int
            Its severities (1-5); empty for no corrupted sets.
        n_models, delta : sanity-check settings (random-init copies, CI margin)
        detectors : "default", "all" or a list
            ``"all"`` lists every registered detector (post-hoc, then model-level), with one
            adjustment the data size forces: when 1 % of the training images is fewer than
            NNGuide's k = 100 (the demo's 2,880 give 29), ``nnguide`` gets ``alpha = 1.0``
            (the whole training set is its guide bank) instead of failing to fit.
            ``"default"`` is the same with only the model-level detectors of
            :data:`DEMO_MODEL_LEVEL`: the others fit on the training images or back-propagate
            through the network for every image of every set and every random-model copy,
            which takes the demo from about 75 s to about 5.5 minutes on two CPU cores
            (``semshift demo --all-detectors``).
        n_resamples : int
            Bootstrap resamples (0 = no confidence intervals).
        batch_size, device : extraction settings
        relative_to : str or Path, optional
            Write paths relative to this folder (the YAML file's folder), else absolute.
        """
        from semshift.features.corruptions import CORRUPTIONS, SEVERITIES

        if corruption not in CORRUPTIONS:
            raise InputError(
                f"demo config: unknown corruption {corruption!r}; known: {', '.join(CORRUPTIONS)}"
            )
        bad = [s for s in severities if s not in SEVERITIES]
        if bad:
            raise InputError(f"demo config: severities must be in 1..5, got {list(severities)}")

        def p(path: Path) -> str:
            if relative_to is None:
                return str(Path(path).resolve())
            return os.path.relpath(Path(path).resolve(), Path(relative_to).resolve())

        sets: dict[str, dict[str, Any]] = {}
        for bin_name, level in BINS.items():
            s = self.sets[f"ood_{bin_name}"]
            sets[bin_name] = {
                "role": "ood", "split": bin_name, "semantic_level": level,
                "covariate_level": 0, "images": p(s.path),
            }  # fmt: skip
        for bin_name, level in BINS.items():
            s = self.sets[f"ood_{bin_name}"]
            for sev in severities:
                sets[f"{bin_name}_{corruption}{sev}"] = {
                    "role": "ood", "semantic_level": level, "covariate_level": int(sev),
                    "images": p(s.path), "corruption": {"name": corruption, "severity": int(sev)},
                }  # fmt: skip
        for fam in self.params.font_families:
            sets[f"font_{fam}"] = {"role": "covariate", "images": p(self.sets[f"font_{fam}"].path)}
        for sev in severities:
            sets[f"{corruption}{sev}"] = {
                "role": "covariate", "covariate_level": int(sev),
                "images": p(self.sets["id_test"].path),
                "corruption": {"name": corruption, "severity": int(sev)},
            }  # fmt: skip
        if detectors in ("all", "default"):
            detectors = self._all_detectors(model_level=None if detectors == "all" else
                                            DEMO_MODEL_LEVEL)  # fmt: skip
        return {
            "name": "semshift demo: glyphs",
            "output": p(Path(output_dir)),
            "seed": self.seed,
            "taxonomy": p(self.taxonomy_path),
            "classes": p(self.classes_path),
            "splits": {"glyphs": {"manifest": p(self.split_manifest)}},
            "model": {
                "name": self.model_name,
                "weights": p(self.weights_path),
                "num_classes": self.num_classes,
                "preset": self.preset,
                "batch_size": int(batch_size),
                "device": device,
            },
            "data": {
                "id_train": {"images": p(self.sets["id_train"].path)},
                "id_val": {"images": p(self.sets["id_val"].path)},
                "id_test": {"images": p(self.sets["id_test"].path)},
                "sets": sets,
            },
            "detectors": detectors,
            "protocols": {
                "osr": {},
                "newclass_failure": {},
                "distance_regression": {
                    "covariate": [f"font_{fam}" for fam in self.params.font_families],
                    "semantic": list(BINS),
                    "n_bins": 20,
                },
                "graded": {"min_count": 10, "metrics": ["auroc", "fpr95", "aupr_in"]},
                "sanity": {"n_models": int(n_models), "delta": float(delta)},
                "generalisation": {},
                "operating_point": {"recall": 0.95, "gallery": 8},
            },
            "metrics": ["auroc", "fpr95", "aupr_in", "aupr_out"],
            "bootstrap": {"n_resamples": int(n_resamples), "level": 0.95, "seed": self.seed},
            "report": {"formats": ["html", "md"]},
        }

    def _all_detectors(self, model_level: Sequence[str] | None = None) -> list[Any]:
        from semshift.detectors import get_class, list_detectors

        n_train = self.sets["id_train"].n_images
        out: list[Any] = []
        post_hoc = list_detectors(level="post_hoc")
        last = [n for n in DEMO_LISTED_LAST if n in post_hoc]
        for name in [*(n for n in post_hoc if n not in last), *last]:
            if name == "nnguide":
                defaults: Any = get_class(name)()
                if math.ceil(defaults.alpha * n_train) < defaults.k:
                    out.append({"name": name, "params": {"alpha": 1.0}})
                    continue
            out.append(name)
        registered = list_detectors(level="model")
        chosen = registered if model_level is None else [n for n in registered if n in model_level]
        return [*out, *chosen]

    def write_config(self, path: str | Path, output_dir: str | Path, **kwargs: Any) -> Path:
        """Write :meth:`config` as YAML to ``path`` with paths relative to its folder."""
        import yaml

        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        cfg = self.config(output_dir, relative_to=out.parent, **kwargs)
        out.write_text(
            "# semshift demo configuration, written by semshift.demo (paths relative to this "
            "file)\n" + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True),
            encoding="utf-8",
        )
        return out


# --------------------------------------------------------------------------- helpers
def fingerprint(params: DemoParams, seed: int) -> str:
    """SHA-256 of the parameters, seed, format and the versions that change the output."""
    import PIL
    import torch

    key = {
        "params": params.to_json(),
        "seed": int(seed),
        "format": _FORMAT,
        "semshift": __version__,
        "pillow": PIL.__version__,
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- build / load
def _load(root: Path, meta: dict[str, Any]) -> DemoData:
    sets = {name: DemoSet(**{**s, "path": root / s["path"]}) for name, s in meta["sets"].items()}
    return DemoData(
        root=root,
        taxonomy_path=root / meta["files"]["taxonomy"],
        classes_path=root / meta["files"]["classes"],
        split_manifest=root / meta["files"]["split_manifest"],
        homoglyphs_path=root / meta["files"]["homoglyphs"],
        weights_path=root / meta["files"]["weights"],
        id_classes=list(meta["id_classes"]),
        id_names=list(meta["id_names"]),
        sets=sets,
        model_name=meta["model_name"],
        preset=meta["preset"],
        test_accuracy=float(meta["test_accuracy"]),
        font_accuracy={k: float(v) for k, v in meta["font_accuracy"].items()},
        homoglyphs=pd.read_csv(root / meta["files"]["homoglyphs"], dtype={"bin": object}),
        params=DemoParams.from_json(meta["params"]),
        seed=int(meta["seed"]),
        fingerprint=meta["fingerprint"],
        timings={k: float(v) for k, v in meta["timings"].items()},
        cached=True,
        history=list(meta.get("history", [])),
    )


def build_demo_data(
    workdir: str | Path,
    *,
    seed: int = 0,
    params: DemoParams | None = None,
    progress: bool = True,
) -> DemoData:
    """Generate the demo data and train its model under ``<workdir>/data`` (cached).

    Parameters
    ----------
    workdir : str or Path
        Folder of the demo; the data go to ``<workdir>/data``.
    seed : int
        Seeds the ID class choice, open-set sampling, augmentation and training.
    params : DemoParams, optional
        Sizes (defaults: 48 ID classes x 60 / 10 / 20 images, 24 open-set classes x 10 images
        per bin, 10 images per ID class and font family, 4 epochs).
    progress : bool
        Show progress bars.

    Returns
    -------
    DemoData
        ``cached`` is True when ``data/demo.json`` already held this fingerprint.

    Raises
    ------
    InputError
        Invalid parameters, or ``<workdir>/data`` exists but was not written by the demo.
    """
    params = params or DemoParams()
    params.check()
    work = Path(workdir)
    root = work / "data"
    fp = fingerprint(params, seed)
    meta_path = root / "demo.json"
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            meta = {}
        if meta.get("fingerprint") == fp and meta.get("complete"):
            return _load(root, meta)
    elif root.exists() and any(root.iterdir()):
        raise InputError(
            f"{root} exists and is not demo data (no demo.json); remove it or choose another "
            "demo folder"
        )
    work.mkdir(parents=True, exist_ok=True)
    tmp = work / f".data-building-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        meta = _build(tmp, params, seed, fp, progress)
        if root.exists():
            old = work / f".data-old-{os.getpid()}"
            root.rename(old)
            shutil.rmtree(old)
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    data = _load(root, meta)
    data.cached = False
    return data


def _build(root: Path, params: DemoParams, seed: int, fp: str, progress: bool) -> dict[str, Any]:
    from semshift.taxonomy import load_taxonomy
    from semshift.training.checkpoint import save_model

    timings: dict[str, float] = {}
    t = time.perf_counter()
    prog = Progress(progress)
    id_fonts = FAMILIES[ID_FAMILY]
    cov_fonts = {fam: get_family(fam) for fam in params.font_families}
    with prog.bar:
        # 1. taxonomy over what the ID fonts cover
        glyphs = inventory(id_fonts)
        tax_path = write_taxonomy(glyphs, root / "taxonomy.csv")
        tax = load_taxonomy(tax_path)
        by_id = {g.id: g for g in glyphs}
        # 2. canonical renderings, ID classes
        with prog.task("glyphs", len(glyphs)) as step:
            canon = canonical([g.char for g in glyphs], id_fonts, font_size=params.font_size)
            step(len(glyphs))
        # an ID class must be drawable in every covariate family (by at least one of its styles)
        eligible = {
            g.char
            for g in glyphs
            if all(any(covered([g.char], [f]) for f in fam) for fam in cov_fonts.values())
        }
        id_idx = choose_id_classes(glyphs, canon, params, eligible, seed)
        id_glyphs = [glyphs[i] for i in id_idx]
        id_ids = [g.id for g in id_glyphs]
        (root / "classes.txt").write_text(
            "".join(f"{g.id} {g.name}\n" for g in id_glyphs), encoding="utf-8"
        )
        # 3. homoglyphs: other characters pixel-near an ID character
        others = [i for i in range(len(glyphs)) if i not in set(id_idx)]
        dist = mean_distance(canon[:, others], canon[:, id_idx])  # (others, id)
        timings["glyphs"] = time.perf_counter() - t

        # 4. split: hierarchy preset over every candidate, then the rendered sample
        t = time.perf_counter()
        sample, homo = _split(root, params, seed, tax, glyphs, id_idx, others, dist)
        timings["split"] = time.perf_counter() - t

        # 5. images
        t = time.perf_counter()
        plan: list[tuple[str, str, Sequence[str], int, Sequence[Font], str | None]] = [
            ("id_train", "id", id_ids, params.n_train, id_fonts, None),
            ("id_val", "id", id_ids, params.n_val, id_fonts, None),
            ("id_test", "id", id_ids, params.n_test, id_fonts, None),
            *[(f"ood_{b}", "ood", sample[b], params.n_ood, id_fonts, b) for b in BINS],
            *[
                (f"font_{fam}", "covariate", id_ids, params.n_font, fonts, None)
                for fam, fonts in cov_fonts.items()
            ],
        ]
        sets, arrays = _images(root, params, seed, prog, by_id, plan)
        timings["images"] = time.perf_counter() - t

        # 6. model
        t = time.perf_counter()
        steps = params.epochs * -(-len(arrays["id_train"][0]) // params.batch_size)
        with prog.task("train", steps) as step:
            result = train_pinned(
                *arrays["id_train"], len(id_ids),
                val_images=arrays["id_val"][0], val_labels=arrays["id_val"][1],
                epochs=params.epochs, batch_size=params.batch_size, lr=params.lr, seed=seed,
                progress=lambda d, _n: step(d),
            )  # fmt: skip
        # with per-tensor checksums, verified whenever the weights are loaded
        save_model(root / "glyphnet.safetensors", result.adapter.module.state_dict())
        test_acc = float(
            (predict(result.adapter, arrays["id_test"][0]) == arrays["id_test"][1]).mean()
        )
        font_acc = {
            fam: float(
                (
                    predict(result.adapter, arrays[f"font_{fam}"][0]) == arrays[f"font_{fam}"][1]
                ).mean()
            )
            for fam in cov_fonts
        }
        timings["train"] = time.perf_counter() - t

    meta: dict[str, Any] = {
        "fingerprint": fp,
        "complete": True,
        "semshift_version": __version__,
        "seed": seed,
        "params": params.to_json(),
        "files": {
            "taxonomy": "taxonomy.csv",
            "classes": "classes.txt",
            "split_manifest": "split/split.json",
            "homoglyphs": "homoglyphs.csv",
            "weights": "glyphnet.safetensors",
        },
        "model_name": MODEL_NAME,
        "preset": PRESET,
        "id_classes": id_ids,
        "id_names": [g.name for g in id_glyphs],
        "sets": {
            name: {**asdict(s), "path": str(s.path.relative_to(root))} for name, s in sets.items()
        },
        "test_accuracy": test_acc,
        "val_accuracy": result.val_accuracy,
        "font_accuracy": font_acc,
        "history": result.history,
        "train_numerics": result.numerics,
        "homoglyphs": {
            "decision": "excluded from the open-set candidates (pixel-near an ID character)",
            "threshold": params.homoglyph_threshold,
            "count": len(homo),
        },
        "timings": timings,
    }
    (root / "demo.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def _split(
    root: Path,
    params: DemoParams,
    seed: int,
    tax: Any,
    glyphs: Sequence[Glyph],
    id_idx: Sequence[int],
    others: Sequence[int],
    dist: NDArray[np.float64],
) -> tuple[dict[str, list[str]], pd.DataFrame]:
    """Write ``split/`` and ``homoglyphs.csv``; the sampled classes per bin and the homoglyphs.

    ``dist`` (others, id) is the pixel distance of every other character to every ID one.
    """
    from semshift.splits.ssb import build_ssb_split

    parent = {g.id: g.parent for g in glyphs}
    by_id = {g.id: g for g in glyphs}
    id_glyphs = [glyphs[i] for i in id_idx]
    id_ids = [g.id for g in id_glyphs]
    near = dist.argmin(1)
    near_d = dist[np.arange(len(others)), near]
    is_homo = near_d < params.homoglyph_threshold
    other_ids = [glyphs[i].id for i in others]
    full = build_ssb_split(id_ids, other_ids, taxonomy=tax, preset="hierarchy")
    bin_of = dict(zip(full.audit["wnid"], full.audit["bin"], strict=True))
    homo_ids = {other_ids[k] for k in np.flatnonzero(is_homo)}
    pool = [c for c in other_ids if c not in homo_ids]
    sample: dict[str, list[str]] = {}
    for b in BINS:
        members = [c for c in full.manifest.bins[b] if c not in homo_ids]
        sample[b] = sample_bin(members, parent, params.ood_classes, seeded_rng(seed, f"bin:{b}"))
        if not sample[b]:
            raise InputError(f"the demo's {b!r} bin is empty; change DemoParams.id_groups")
    split = build_ssb_split(
        id_ids, pool, taxonomy=tax, preset="hierarchy",
        restrict_to=[c for b in BINS for c in sample[b]],
    )  # fmt: skip
    split.manifest.extra["demo"] = {
        "homoglyphs_excluded": sorted(homo_ids),
        "homoglyph_threshold": params.homoglyph_threshold,
        "sampled_per_bin": params.ood_classes,
    }
    split.write(root / "split")
    rows = [
        {
            "id": other_ids[k],
            "char": by_id[other_ids[k]].char,
            "name": by_id[other_ids[k]].name,
            "group": parent[other_ids[k]],
            "bin": bin_of[other_ids[k]],
            "nearest_id": id_ids[near[k]],
            "nearest_id_char": id_glyphs[near[k]].char,
            "nearest_id_name": id_glyphs[near[k]].name,
            "distance": round(float(near_d[k]), 6),
        }
        for k in np.flatnonzero(is_homo)
    ]
    homo = pd.DataFrame(
        rows,
        columns=["id", "char", "name", "group", "bin", "nearest_id", "nearest_id_char",
                 "nearest_id_name", "distance"],
    ).sort_values(["distance", "id"], kind="stable")  # fmt: skip
    homo.to_csv(root / "homoglyphs.csv", index=False)
    return sample, homo


def _images(
    root: Path,
    params: DemoParams,
    seed: int,
    prog: Progress,
    by_id: dict[str, Glyph],
    plan: Sequence[tuple[str, str, Sequence[str], int, Sequence[Font], str | None]],
) -> tuple[dict[str, DemoSet], dict[str, tuple[NDArray[np.uint8], NDArray[np.int64]]]]:
    """Render and save each set of ``plan`` (name, role, class ids, images per class, fonts,
    bin) under ``images/``, with its CSV; the :class:`DemoSet` and (images, labels) of each."""
    sets: dict[str, DemoSet] = {}
    arrays: dict[str, tuple[NDArray[np.uint8], NDArray[np.int64]]] = {}
    total = sum(len(c) * k for _, _, c, k, _, _ in plan)
    done = 0
    with prog.task("images", total) as step:
        for name, role, ids, k, fonts, bin_name in plan:
            chars = [by_id[i].char for i in ids]
            imgs, labels, used, aug = render_set(chars, k, fonts, params, name, seed)
            folder = root / "images" / name
            rel = [f"{ids[lab]}/{j % k:04d}.png" for j, lab in enumerate(labels)]
            save_pngs(imgs, [folder / r for r in rel])
            pd.DataFrame(
                {
                    "path": rel,
                    "class": [ids[lab] for lab in labels],
                    "char": [chars[lab] for lab in labels],
                    "font": [f.key for f in used],
                    "font_file": [f.file for f in used],
                    "dx": aug[:, 0].astype(int),
                    "dy": aug[:, 1].astype(int),
                    "angle": aug[:, 2].round(6),
                    "scale": aug[:, 3].round(6),
                }
            ).to_csv(root / "images" / f"{name}.csv", index=False)
            arrays[name] = (imgs, labels)
            sets[name] = DemoSet(
                name=name, path=folder, role=role, classes=list(ids), n_images=len(imgs),
                split=bin_name, semantic_level=BINS.get(bin_name or ""),
                fonts=sorted({f.key for f in used}),
            )  # fmt: skip
            done += len(imgs)
            step(done)
    return sets, arrays
