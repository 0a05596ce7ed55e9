"""The operating-point image gallery: what each detector's rejection threshold lets through
and throws away, as small thumbnails with captions.

Reads only the output directory: the ``threshold`` rows of the ``operating_point`` protocol in
the results, and the per-sample tables ``scores/<set>.parquet`` with the columns
:data:`GALLERY_COLUMNS` (``path``: the image file, ``class_id``, ``nearest_known``,
``nearest_known_name``, ``pred_name``), written by the run layer. Runs written before those
columns existed get no gallery and a sentence saying why (:func:`operating_galleries`).

Per detector (:data:`KINDS`):

- ``accepted_ood``: the OOD rows (label -1) with the highest scores among those accepted
  (score >= t);
- ``rejected_correct``: the correctly classified id_test rows with the lowest scores among
  those rejected (score < t);
- ``disagree_msp``: the rows where the detector and ``msp`` disagree most: the largest absolute
  difference of their rank percentiles within the row's set (as the ImageNet-OOD paper
  compares detectors image by image).

Thumbnails (:class:`ThumbnailCache`): PIL, 64 px on the long side, JPEG quality 80 or PNG when
that is smaller (line-art glyphs), made once per image path; an unreadable image becomes a grey
placeholder that keeps its caption.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from semshift.report._load import RunData

__all__ = [
    "DEFAULT_MAX_REPORT_BYTES",
    "DEFAULT_PER_KIND",
    "GALLERY_COLUMNS",
    "GALLERY_DIR",
    "KINDS",
    "Gallery",
    "GallerySettings",
    "Thumbnail",
    "ThumbnailCache",
    "gallery_settings",
    "make_thumbnail",
    "operating_galleries",
]

#: Per-sample columns the gallery reads from ``scores/<set>.parquet`` (docs/design/run.md).
GALLERY_COLUMNS = ("path", "class_id", "nearest_known", "nearest_known_name", "pred_name")
#: Gallery kinds per detector, in report order.
KINDS = ("accepted_ood", "rejected_correct", "disagree_msp")
#: Where report.md's thumbnails are written, relative to the output directory.
GALLERY_DIR = "figures/gallery"
#: Defaults of ``protocols.operating_point`` (``OperatingPointConfig``).
DEFAULT_PER_KIND = 8
DEFAULT_MAX_REPORT_BYTES = 10_000_000
THUMB_SIZE = 64
JPEG_QUALITY = 80
_REFERENCE = "msp"


@dataclass(frozen=True)
class Thumbnail:
    """An encoded thumbnail and its caption.

    Attributes
    ----------
    data : bytes
        JPEG or PNG bytes.
    mime : str
        ``image/jpeg`` or ``image/png``.
    width, height : int
        Pixel size.
    caption : str
        Plain text.
    readable : bool
        False for the grey placeholder of an image that could not be read.
    """

    data: bytes
    mime: str
    width: int
    height: int
    caption: str
    readable: bool = True

    @property
    def filename(self) -> str:
        """File name under :data:`GALLERY_DIR`: a hash of the bytes (identical ones shared)."""
        ext = "jpg" if self.mime == "image/jpeg" else "png"
        return f"{hashlib.sha1(self.data).hexdigest()[:16]}.{ext}"


@dataclass
class Gallery:
    """A report block: a titled row of thumbnails (``empty``: the sentence when none exist)."""

    key: str
    title: str
    caption: str
    thumbnails: list[Thumbnail] = field(default_factory=list)
    empty: str = ""


@dataclass(frozen=True)
class GallerySettings:
    """``protocols.operating_point`` of the run's config, as the report uses it."""

    per_kind: int = DEFAULT_PER_KIND
    max_report_bytes: int = DEFAULT_MAX_REPORT_BYTES
    recall: float | None = None


def _int_setting(value: Any, default: int, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    v = int(value)
    return default if v < low or (high is not None and v > high) else v


def gallery_settings(provenance: Mapping[str, Any]) -> GallerySettings:
    """The gallery settings in ``results.json`` (``config.protocols.operating_point``).

    Missing or malformed values fall back to the defaults (8 thumbnails per kind, 10 MB);
    ``recall`` is None when the run's config has no ``operating_point`` entry.

    Examples
    --------
    >>> cfg = {"config": {"protocols": {"operating_point": {"gallery": 2}}}}
    >>> gallery_settings(cfg)
    GallerySettings(per_kind=2, max_report_bytes=10000000, recall=0.95)
    >>> gallery_settings({}).recall is None
    True
    """
    try:
        op = provenance["config"]["protocols"]["operating_point"]
    except (KeyError, TypeError):
        return GallerySettings()
    if not isinstance(op, Mapping):
        op = {}
    recall = op.get("recall", 0.95)
    ok = isinstance(recall, int | float) and not isinstance(recall, bool) and 0 < recall <= 1
    return GallerySettings(
        per_kind=_int_setting(op.get("gallery"), DEFAULT_PER_KIND, 0, 64),
        max_report_bytes=_int_setting(op.get("max_report_bytes"), DEFAULT_MAX_REPORT_BYTES, 0),
        recall=float(recall) if ok else 0.95,
    )


# ---------------------------------------------------------------------- thumbnails
def _encode(image: Any) -> tuple[bytes, str]:
    """JPEG (quality 80) or PNG, whichever is smaller."""
    jpeg, png = io.BytesIO(), io.BytesIO()
    image.save(jpeg, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    image.save(png, format="PNG", optimize=True)
    if png.tell() < jpeg.tell():
        return png.getvalue(), "image/png"
    return jpeg.getvalue(), "image/jpeg"


def make_thumbnail(path: str, size: int = THUMB_SIZE) -> tuple[bytes, str, int, int]:
    """Read an image and encode it at ``size`` px on the long side.

    Parameters
    ----------
    path : str
        Image file.
    size : int, default 64

    Returns
    -------
    data, mime, width, height

    Raises
    ------
    Exception
        Whatever PIL raises on a missing or corrupt file (:class:`ThumbnailCache` turns it
        into a placeholder).
    """
    from PIL import Image

    with Image.open(path) as im:
        im.draft("RGB", (2 * size, 2 * size))  # JPEG: decode at a reduced scale
        im.load()
        if im.mode not in ("RGB", "L"):
            rgba = im.convert("RGBA")
            image = Image.new("RGB", rgba.size, "white")
            image.paste(rgba, mask=rgba.getchannel("A"))
        else:
            image = im.copy()
    w, h = image.size
    scale = size / max(w, h)
    new = (max(1, round(w * scale)), max(1, round(h * scale)))
    if new != (w, h):
        resample = Image.Resampling.LANCZOS if scale < 1 else Image.Resampling.NEAREST
        image = image.resize(new, resample)
    data, mime = _encode(image)
    return data, mime, new[0], new[1]


def _placeholder(size: int) -> tuple[bytes, str, int, int]:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (size, size), 200).save(buf, format="PNG", optimize=True)
    return buf.getvalue(), "image/png", size, size


class ThumbnailCache:
    """Thumbnails made once per image path (a path shown in several galleries is read once).

    Examples
    --------
    >>> cache = ThumbnailCache()
    >>> t = cache.get("/no/such/image.png", "pred: cat")
    >>> t.readable, t.caption, (t.width, t.height)
    (False, 'unreadable image; pred: cat', (64, 64))
    """

    def __init__(self, size: int = THUMB_SIZE) -> None:
        self.size = size
        self._images: dict[str, tuple[bytes, str, int, int] | None] = {}

    def get(self, path: str, caption: str) -> Thumbnail:
        """The thumbnail of ``path`` with ``caption`` (a grey placeholder if unreadable)."""
        if path not in self._images:
            try:
                self._images[path] = make_thumbnail(path, self.size)
            except Exception:  # PIL raises many types on corrupt files: never fail a report
                self._images[path] = None
        got = self._images[path]
        if got is None:
            data, mime, w, h = _placeholder(self.size)
            return Thumbnail(data, mime, w, h, f"unreadable image; {caption}", readable=False)
        return Thumbnail(*got, caption=caption)


# ---------------------------------------------------------------------- selection
def _text(value: Any) -> str | None:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    text = str(value)
    return text or None


def _caption(row: pd.Series, score: float, extra: str = "") -> str:
    pred_name = _text(row.get("pred_name"))
    pred = row.get("pred")
    if pred_name is None:
        pred_ok = pred is not None and not pd.isna(pred) and int(pred) >= 0
        pred_name = f"class {int(pred)}" if pred_ok else "none"
    parts = [f"pred: {pred_name}"]
    near_name, near_id = _text(row.get("nearest_known_name")), _text(row.get("nearest_known"))
    if near_name or near_id:
        both = f"{near_name} ({near_id})" if near_name and near_id else near_name or near_id
        parts.append(f"nearest known: {both}")
    parts.append(f"score {score:.4g}")
    class_id, class_name = _text(row.get("class_id")), _text(row.get("class_name"))
    true = f"{class_name} ({class_id})" if class_name and class_id else class_name or class_id
    where = f"set {row['__set']}" + (f", class {true}" if true else "")
    parts.append(where)
    if extra:
        parts.append(extra)
    return "; ".join(parts)


def _read_scores(run: RunData, detectors: Sequence[str]) -> tuple[pd.DataFrame | None, str | None]:
    """Every score file's rows with the gallery columns, or the reason there is no gallery."""
    if not run.score_files:
        return None, f"there is no scores/ folder in {run.root}, so no image can be shown"
    wanted = ["label", "pred", "role", *GALLERY_COLUMNS, "class_name"]  # class_name: newer runs
    wanted += [f"score:{d}" for d in dict.fromkeys([*detectors, _REFERENCE])]
    frames = []
    for name in run.score_files:
        frame = run.read_scores(name, wanted)
        frame["__set"] = name
        frames.append(frame)
    if not any("path" in f.columns for f in frames):
        return None, (
            "the per-sample tables in scores/ have no image paths (column 'path'; runs written "
            "before semshift recorded them), so no image can be shown"
        )
    both = pd.concat(frames, ignore_index=True)
    if "path" not in both or both["path"].isna().all():
        return None, (
            "no scored sample has an image path (the sets come from feature stores without "
            "images), so no image can be shown"
        )
    return both, None


def _rank_pct(frame: pd.DataFrame, column: str) -> pd.Series:
    """Percentile rank (average ranks / n, 100 = highest) of each row within its set."""
    return frame.groupby("__set")[column].rank(pct=True) * 100.0


def _top(order_key: np.ndarray, eligible: np.ndarray, n: int) -> np.ndarray:
    """Row positions of the ``n`` eligible rows with the largest key (stable on ties)."""
    idx = np.flatnonzero(eligible)
    if idx.size == 0 or n <= 0:
        return idx[:0]
    order = np.argsort(-order_key[idx], kind="stable")
    return idx[order[:n]]


def operating_galleries(
    run: RunData,
    thresholds: Mapping[str, float],
    detectors: Sequence[str],
    per_kind: int,
    cache: ThumbnailCache | None = None,
) -> tuple[dict[str, list[Gallery]], str | None]:
    """The galleries of every detector, or the reason there are none.

    Parameters
    ----------
    run : RunData
        The output directory.
    thresholds : mapping of str to float
        Detector -> its threshold (the ``operating_point`` ``threshold`` rows); a detector
        without one gets only the ``disagree_msp`` gallery.
    detectors : sequence of str
        Detectors, in report order.
    per_kind : int
        Thumbnails per detector and kind (0 = no gallery).
    cache : ThumbnailCache, optional
        Shared thumbnail cache.

    Returns
    -------
    galleries : dict of str to list of Gallery
        Per detector, one :class:`Gallery` per kind in :data:`KINDS` that applies.
    reason : str or None
        Why there is no gallery at all (then ``galleries`` is empty).
    """
    if per_kind <= 0:
        return {}, "the image gallery is off (protocols.operating_point.gallery = 0)"
    frame, reason = _read_scores(run, detectors)
    if frame is None:
        return {}, reason
    cache = cache or ThumbnailCache()
    has_path = frame["path"].notna().to_numpy()
    label = frame["label"].to_numpy() if "label" in frame else np.zeros(len(frame), int)
    pred = frame["pred"].to_numpy() if "pred" in frame else np.full(len(frame), -2)
    is_ood = label == -1
    correct_id = (frame["__set"] == "id_test").to_numpy() & (label >= 0) & (pred == label)
    ref_col = f"score:{_REFERENCE}"
    ref_pct = _rank_pct(frame, ref_col).to_numpy() if ref_col in frame else None
    out: dict[str, list[Gallery]] = {}

    def thumbs(
        rows: np.ndarray, scores: np.ndarray, extra: Sequence[str] | None = None
    ) -> list[Thumbnail]:
        return [
            cache.get(
                str(frame["path"].iat[i]),
                _caption(frame.iloc[i], float(scores[i]), extra[k] if extra else ""),
            )
            for k, i in enumerate(rows)
        ]

    for det in detectors:
        col = f"score:{det}"
        if col not in frame:
            continue
        s = frame[col].to_numpy(dtype=np.float64)
        finite = np.isfinite(s) & has_path
        galleries: list[Gallery] = []
        t = thresholds.get(det)
        if t is not None and math.isfinite(t):
            acc = _top(s, finite & is_ood & (s >= t), per_kind)
            galleries.append(
                Gallery(
                    f"{det}-accepted_ood",
                    f"{det}: most confidently accepted OOD images",
                    f"The OOD images (label -1) with the highest {det} scores at or above the "
                    f"threshold t = {t:.4g}: what the rejection rule lets through.",
                    thumbs(acc, s),
                    "" if acc.size else f"No OOD image with an image path scores >= t = {t:.4g}.",
                )
            )
            rej = _top(-s, finite & correct_id & (s < t), per_kind)
            galleries.append(
                Gallery(
                    f"{det}-rejected_correct",
                    f"{det}: rejected correctly classified ID images",
                    f"Correctly classified id_test images with the lowest {det} scores below "
                    f"t = {t:.4g}: what the rejection rule throws away although the classifier "
                    "was right.",
                    thumbs(rej, s),
                    ""
                    if rej.size
                    else "No correctly classified id_test image with an image path is rejected.",
                )
            )
        if det != _REFERENCE and ref_pct is not None:
            pct = _rank_pct(frame, col).to_numpy()
            diff = pct - ref_pct
            ok = finite & np.isfinite(diff)
            dis = _top(np.abs(np.where(ok, diff, 0.0)), ok, per_kind)
            extra = [f"rank pct {det} {pct[i]:.0f} vs {_REFERENCE} {ref_pct[i]:.0f}" for i in dis]
            galleries.append(
                Gallery(
                    f"{det}-disagree_msp",
                    f"{det} vs {_REFERENCE}: largest disagreement",
                    f"Images where {det} and {_REFERENCE} disagree most: the largest difference "
                    "of their rank percentiles within the image's set (100 = the most "
                    "in-distribution score of the set).",
                    thumbs(dis, s, extra),
                    "" if dis.size else f"No image has finite {det} and {_REFERENCE} scores.",
                )
            )
        if galleries:
            out[det] = galleries
    return out, None
