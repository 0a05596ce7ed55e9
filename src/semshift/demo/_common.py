"""Glyph sampling and rendering shared by the demo's builders (:mod:`semshift.demo.build`,
:mod:`semshift.demo.table1`): seeded draws, ID class choice, open-set and outlier class
samples, rendered and saved image sets, progress bars.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from semshift.demo.fonts import Font, covered
from semshift.demo.glyphs import Glyph
from semshift.demo.render import mean_distance, render_many
from semshift.errors import InputError

if TYPE_CHECKING:
    from semshift.demo.build import DemoData, DemoParams

__all__ = [
    "ID_FAMILY",
    "Progress",
    "char_id",
    "choose_id_classes",
    "choose_outlier_classes",
    "render_set",
    "sample_bin",
    "save_pngs",
    "seeded_rng",
]

#: The font family of the ID images, the open-set images and the outliers.
ID_FAMILY = "dejavu-sans"


def seeded_rng(seed: int, what: str) -> np.random.Generator:
    """The generator of one seeded draw: ``seed`` and the CRC-32 of ``what``."""
    return np.random.default_rng([int(seed), zlib.crc32(what.encode())])


class Progress:
    """A rich progress bar per step (disabled when ``enabled`` is false)."""

    def __init__(self, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from semshift.progress import bar_console, progress_wanted

        self.bar = Progress(
            TextColumn("demo {task.description:<10}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=bar_console(), disable=not progress_wanted(enabled),
            transient=True,
        )  # fmt: skip

    @contextmanager
    def task(self, name: str, total: int) -> Iterator[Callable[[int], None]]:
        """A bar of ``total`` steps; yields ``step(k)``, which sets the steps done to k."""
        tid = self.bar.add_task(name, total=total)
        yield lambda k: self.bar.update(tid, completed=k)
        self.bar.update(tid, completed=total)


def choose_id_classes(
    glyphs: list[Glyph], canon: NDArray[np.uint8], params: DemoParams, eligible: set[str], seed: int
) -> list[int]:
    """Indices of the ID classes: per group, a seeded order, skipping pixel-near characters."""
    chosen: list[int] = []
    for group, count in params.id_groups:
        pool = [i for i, g in enumerate(glyphs) if g.parent == group and g.char in eligible]
        if len(pool) < count:
            raise InputError(
                f"DemoParams.id_groups: group {group!r} has {len(pool)} characters covered by "
                f"every font family, fewer than the {count} asked for"
            )
        order = seeded_rng(seed, f"id:{group}").permutation(len(pool))
        picked = 0
        for j in order:
            i = pool[int(j)]
            if chosen:
                d = mean_distance(canon[:, [i]], canon[:, chosen])[0]
                if d.min() < params.homoglyph_threshold:
                    continue
            chosen.append(i)
            picked += 1
            if picked == count:
                break
        if picked < count:
            raise InputError(
                f"DemoParams.id_groups: group {group!r} has only {picked} characters that are "
                f"not pixel-near each other; ask for at most {picked}"
            )
    return chosen


def sample_bin(
    ids: list[str], parent: dict[str, str], k: int, rng: np.random.Generator
) -> list[str]:
    """Up to k ids, round-robin over their parents (shuffled), each parent's ids shuffled."""
    groups: dict[str, list[str]] = {}
    for i in ids:
        groups.setdefault(parent[i], []).append(i)
    names = sorted(groups)
    names = [names[j] for j in rng.permutation(len(names))]
    queues = {g: [groups[g][j] for j in rng.permutation(len(groups[g]))] for g in names}
    out: list[str] = []
    while len(out) < k and any(queues.values()):
        for g in names:
            if queues[g] and len(out) < k:
                out.append(queues[g].pop(0))
    return out


def save_pngs(images: NDArray[np.uint8], paths: Sequence[Path]) -> None:
    """Write each grey-scale image (n, H, W) as a PNG at its path (folders created)."""
    from PIL import Image

    for img, path in zip(images, paths, strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img, mode="L").save(path, format="PNG")


def render_set(
    chars: Sequence[str],
    per_class: int,
    fonts: Sequence[Font],
    params: DemoParams,
    rng_key: str,
    seed: int,
) -> tuple[NDArray[np.uint8], NDArray[np.int64], list[Font], NDArray[np.float64]]:
    """Images of each char, labels = position in ``chars``.

    Each char cycles through the styles of ``fonts`` that cover it (STIX's italic and bold
    styles lack most symbols); a char no font covers is an error.
    """
    n = len(chars) * per_class
    labels = np.repeat(np.arange(len(chars)), per_class)
    font_seq: list[Font] = []
    for ch in chars:
        usable = [f for f in fonts if covered([ch], [f])]
        if not usable:
            raise InputError(f"no font of {fonts[0].family} covers U+{ord(ch):04X}")
        font_seq.extend(usable[k % len(usable)] for k in range(per_class))
    aug = params.augment.draw(seeded_rng(seed, rng_key), n)
    imgs = render_many([chars[int(j)] for j in labels], font_seq, aug, font_size=params.font_size)
    return imgs, labels.astype(np.int64), font_seq, aug


def char_id(text: str) -> str:
    """``U+0416`` or a single character -> ``U+0416``."""
    t = text.strip()
    if len(t) == 1:
        return f"U+{ord(t):04X}"
    if t.upper().startswith("U+"):
        try:
            return f"U+{int(t[2:], 16):04X}"
        except ValueError:
            pass
    raise InputError(f"outlier_classes: {text!r} is neither a character nor U+XXXX")


def choose_outlier_classes(
    data: DemoData, spec: int | tuple[str, ...], glyphs: Sequence[Glyph], seed: int
) -> list[str]:
    """Outlier Exposure's auxiliary classes: the characters ``spec`` names, or ``spec`` of them
    sampled (round-robin over groups) outside the split's classes and the homoglyphs."""
    from semshift.splits.manifest import SplitManifest

    if isinstance(spec, tuple):
        known = {g.id for g in glyphs}
        chosen = list(dict.fromkeys(char_id(c) for c in spec))
        missing = [c for c in chosen if c not in known]
        if missing:
            raise InputError(
                f"outlier_classes: {', '.join(missing)} not among the {len(glyphs)} characters "
                "the demo's fonts cover"
            )
        return chosen
    manifest = SplitManifest.read(data.split_manifest)
    taken = set(manifest.known) | {c for ids in manifest.bins.values() for c in ids}
    taken |= set(data.homoglyphs["id"].astype(str))
    pool = [g.id for g in glyphs if g.id not in taken]
    parent = {g.id: g.parent for g in glyphs}
    chosen = sample_bin(pool, parent, int(spec), seeded_rng(seed, "outliers"))
    if len(chosen) < spec:
        raise InputError(
            f"outlier_classes: only {len(chosen)} characters are outside the test splits, "
            f"asked for {spec}"
        )
    return chosen
