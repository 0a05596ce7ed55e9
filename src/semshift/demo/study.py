"""``semshift demo --study``: a small study on the glyph data.

Four GlyphNet variants of different widths (channels ``w, 2w, 4w, 8w`` for w = 4, 8, 12, 16;
the last is the demo's own model, reused as built) are trained on the demo's ID training images
with the demo's recipe and seed (pinned numerics: the same weights whatever the threads), then
run as a :mod:`semshift.study` over the demo's clean open-set bins (Easy, Medium, Hard) with the
OSR protocol and every post-hoc detector (as the demo runs them: NNGuide with its whole training
set as guide bank when the data are small). The study writes the mean over models, the ranks and
the relation of closed-set accuracy to AUROC across the four models (SSB's claim that a better
classifier is a better open-set detector) under ``<out>/study``.

Everything is cached: the variants' weights (by data fingerprint and width) and every cell.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semshift.demo.build import DemoData, DemoParams, build_demo_data
from semshift.demo.model import MODEL_NAME

__all__ = ["STUDY_WIDTHS", "demo_study", "demo_study_config"]

#: the variants: label -> GlyphNet widths (the last is the demo's own model)
STUDY_WIDTHS: dict[str, tuple[int, int, int, int]] = {
    "glyphnet-w4": (4, 8, 16, 32),
    "glyphnet-w8": (8, 16, 32, 64),
    "glyphnet-w12": (12, 24, 48, 96),
    "glyphnet-w16": (16, 32, 64, 128),
}
DEFAULT_WIDTHS = (16, 32, 64, 128)


def _images(data: DemoData, name: str) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """A class-folder set of the demo as (n, H, W) grey images and labels, files sorted."""
    from PIL import Image

    root = data.sets[name].path
    images, labels = [], []
    for label, cid in enumerate(data.id_classes):
        for path in sorted((root / cid).glob("*.png")):
            with Image.open(path) as img:
                images.append(np.asarray(img.convert("L"), dtype=np.uint8))
            labels.append(label)
    return np.stack(images), np.asarray(labels, np.int64)


def _variant(
    data: DemoData, folder: Path, label: str, widths: tuple[int, int, int, int], say: Any
) -> Path:
    """The weights of one variant: the demo's own for the default widths, else trained once
    (cached under ``folder`` by data fingerprint and widths)."""
    from semshift.demo.model import train_pinned
    from semshift.training.checkpoint import save_model

    if tuple(widths) == DEFAULT_WIDTHS:
        return data.weights_path
    path = folder / f"{label}-{data.fingerprint[:12]}.safetensors"
    if path.is_file():
        return path
    x, y = _images(data, "id_train")
    xv, yv = _images(data, "id_val")
    p = data.params
    result = train_pinned(
        x, y, len(data.id_classes), val_images=xv, val_labels=yv, epochs=p.epochs,
        batch_size=p.batch_size, lr=p.lr, seed=data.seed, widths=widths,
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_model(tmp, result.adapter.module.state_dict())
    tmp.replace(path)
    say(f"trained {label} in {result.seconds:.1f} s: validation accuracy "
        f"{100 * result.val_accuracy:.1f} %")  # fmt: skip
    return path


def demo_study_config(
    data: DemoData, out: Path, weights: dict[str, Path], *, n_resamples: int = 1000
) -> dict[str, Any]:
    """The study (a dict for :func:`semshift.study.load_study`) over the demo's clean bins."""
    run_cfg = data.config(out / "unused", severities=(), n_resamples=n_resamples)
    sets = {k: v for k, v in run_cfg["data"]["sets"].items() if k in ("easy", "medium", "hard")}
    dataset: dict[str, Any] = {
        "data": {**run_cfg["data"], "sets": sets},
        "classes": run_cfg.get("classes"),
        "taxonomy": run_cfg.get("taxonomy"),
        "protocols": {"osr": {}},
    }
    dataset = {k: v for k, v in dataset.items() if v is not None}
    models = [
        {"name": MODEL_NAME, "weights": str(weights[label]), "label": label,
         "num_classes": len(data.id_classes), "kwargs": {"widths": list(widths)},
         "preset": data.preset}
        for label, widths in STUDY_WIDTHS.items()
    ]  # fmt: skip
    return {
        "name": "demo",
        "output": str(out),
        "models": models,
        "datasets": {"glyphs": dataset},
        "detectors": data._all_detectors(model_level=()),  # every post-hoc one, as the demo
        "run": {"bootstrap": {"n_resamples": n_resamples}},
        "plugins": ["semshift.demo"],
    }


def demo_study(
    out: str | Path,
    *,
    seed: int = 0,
    params: DemoParams | None = None,
    n_resamples: int = 1000,
    jobs: int | str = 1,
    force: bool = False,
    progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> Any:
    """Build (or reuse) the demo data, train the variants and run the study.

    Returns the :class:`semshift.study.StudyResult`; files under ``<out>/study``.
    """
    from semshift.study import load_study, run_study

    say = log or (lambda _line: None)
    out = Path(out)
    data = build_demo_data(out, seed=seed, params=params, progress=progress)
    root = out / "study"
    weights = {
        label: _variant(data, root / "models", label, widths, say)
        for label, widths in STUDY_WIDTHS.items()
    }
    study = demo_study_config(data, root, weights, n_resamples=n_resamples)
    root.mkdir(parents=True, exist_ok=True)
    (root / "study.yaml").write_text(_yaml(study), encoding="utf-8")
    return run_study(load_study(study, base_dir=root), jobs=jobs, force=force, log=say)


def _yaml(study: dict[str, Any]) -> str:
    """The study as YAML (so ``semshift study run <out>/study/study.yaml`` re-runs it)."""
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(study, default=str)), sort_keys=False)
