"""IS-OOD's LAID: a language-aligned decomposition of image-text embeddings into a semantic
and a covariate half, trained on text triplets; prompt templates; the LAID-vs-PCA check.

Method reference: docs/methods.md#is-ood-graded-shift.

An orthogonal matrix ``W`` (l x l) over an image-text embedding space; ``f_sem = (f W)[:l/2]``
and ``f_cov = (f W)[l/2:]``. It is trained on text embeddings of triplets: a standard text (a
covariate template filled with a label), a semantic-shift text (same template, other label) and
a covariate-shift text (other template, same label) with

``L_sem = [d(st_sem, cs_sem) - d(st_sem, ss_sem) + m]_+``,
``L_cov = [d(st_cov, ss_cov) - d(st_cov, cs_cov) + m]_+``,
``L_orth = ||W^T W - I||^2`` (d = cosine distance).

References
----------
Long, X., Zhang, J., Shan, S. and Chen, X. (2025). Rethinking the evaluation of
out-of-distribution detection: a sorites paradox. (IS-OOD.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semshift.errors import InputError

__all__ = [
    "COVARIATE_TEMPLATES",
    "LAID",
    "TEMPLATE_SETS",
    "check_laid_options",
    "clip_imagenet_templates",
    "embed_triplets",
    "fit_laid_from_text",
    "laid_triplets",
    "resolve_templates",
    "train_laid",
]

#: covariate templates: styles, renditions, corruptions, lighting, viewpoint (``{}`` = label)
COVARIATE_TEMPLATES: tuple[str, ...] = (
    "a photo of a {}.",
    "a close-up photo of a {}.",
    "a cropped photo of a {}.",
    "a photo of a small {}.",
    "a photo of a large {}.",
    "a blurry photo of a {}.",
    "a pixelated photo of a {}.",
    "a jpeg corrupted photo of a {}.",
    "a noisy photo of a {}.",
    "a grainy photo of a {}.",
    "a low resolution photo of a {}.",
    "an out of focus photo of a {}.",
    "a motion blurred photo of a {}.",
    "a foggy photo of a {}.",
    "a photo of a {} in the snow.",
    "a photo of a {} in the rain.",
    "a dark photo of a {}.",
    "a bright photo of a {}.",
    "an overexposed photo of a {}.",
    "an underexposed photo of a {}.",
    "a photo of a {} at night.",
    "a photo of a {} in sunlight.",
    "a black and white photo of a {}.",
    "a sepia photo of a {}.",
    "a high contrast photo of a {}.",
    "a low contrast photo of a {}.",
    "a sketch of a {}.",
    "a pencil drawing of a {}.",
    "a painting of a {}.",
    "an oil painting of a {}.",
    "a watercolor painting of a {}.",
    "a cartoon of a {}.",
    "a comic illustration of a {}.",
    "a rendering of a {}.",
    "a 3d render of a {}.",
    "a video game screenshot of a {}.",
    "a plastic toy {}.",
    "a sculpture of a {}.",
    "an origami {}.",
    "an embroidery of a {}.",
    "a tattoo of a {}.",
    "graffiti of a {}.",
    "a pixel art {}.",
    "a photo of a {} seen from above.",
    "a photo of a {} from a strange angle.",
    "an infrared photo of a {}.",
    "a photo of a {} underwater.",
    "a photo of a {} behind glass.",
)


def _cosine_distance_torch(a: Any, b: Any) -> Any:
    import torch

    return 1.0 - torch.nn.functional.cosine_similarity(a, b, dim=1)


@dataclass
class LAID:
    """A trained LAID decomposition: ``W`` (l x l), near-orthogonal."""

    W: NDArray[np.float64]
    meta: dict[str, Any] | None = None

    @property
    def dim(self) -> int:
        return int(self.W.shape[0])

    def transform(self, features: ArrayLike) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """``(f_sem, f_cov)``, each (n, l/2), from features (n, l)."""
        f = np.asarray(features, dtype=np.float32)
        if f.ndim != 2 or f.shape[1] != self.dim:
            raise InputError(f"LAID expects features of dimension {self.dim}, got shape {f.shape}")
        z = f @ self.W.astype(np.float32)
        half = self.dim // 2
        return z[:, :half], z[:, half:]

    def orthogonality_error(self) -> float:
        """``||W^T W - I||_F``."""
        return float(np.linalg.norm(self.W.T @ self.W - np.eye(self.dim)))

    def save(self, path: str | Path) -> Path:
        """Save as ``.npz`` (arrays only; loading never unpickles)."""
        path = Path(path)
        np.savez(
            path,
            W=self.W,
            meta_keys=np.array(list((self.meta or {}).keys()), dtype=str),
            meta_values=np.array([str(v) for v in (self.meta or {}).values()], dtype=str),
        )
        return path if path.suffix == ".npz" else path.with_suffix(path.suffix + ".npz")

    @classmethod
    def load(cls, path: str | Path) -> LAID:
        try:
            with np.load(path, allow_pickle=False) as data:
                w = np.asarray(data["W"], dtype=np.float64)
                meta = dict(
                    zip(data["meta_keys"].tolist(), data["meta_values"].tolist(), strict=True)
                )
        except (OSError, KeyError, ValueError) as err:
            raise InputError(f"cannot load a LAID matrix from {path}: {err}") from None
        if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] % 2:
            raise InputError(f"{path}: W must be square with an even dimension, got {w.shape}")
        return cls(W=w, meta=meta)


def laid_triplets(
    labels: Sequence[str],
    templates: Sequence[str] = COVARIATE_TEMPLATES,
    n: int = 20_000,
    seed: int = 0,
) -> tuple[list[str], list[str], list[str]]:
    """Texts of ``n`` (standard, semantic-shift, covariate-shift) triplets.

    Standard = template i with label a; semantic shift = template i with label b != a; covariate
    shift = template j != i with label a. Drawn with ``seed``.
    """
    if len(labels) < 2 or len(templates) < 2:
        raise InputError("LAID needs at least two labels and two templates")
    bad = [t for t in templates if t.count("{}") != 1]
    if bad:
        raise InputError(f"template {bad[0]!r} must contain exactly one '{{}}'")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(labels), n)
    b = (a + rng.integers(1, len(labels), n)) % len(labels)
    i = rng.integers(0, len(templates), n)
    j = (i + rng.integers(1, len(templates), n)) % len(templates)
    st = [templates[x].format(labels[y]) for x, y in zip(i, a, strict=True)]
    ss = [templates[x].format(labels[y]) for x, y in zip(i, b, strict=True)]
    cs = [templates[x].format(labels[y]) for x, y in zip(j, a, strict=True)]
    return st, ss, cs


def check_laid_options(
    *,
    epochs: int = 200,
    batch_size: int = 1024,
    lr: float = 1e-2,
    n_triplets: int = 20_000,
    n_labels: int | None = None,
    names: Mapping[str, str] | None = None,
) -> None:
    """Refuse LAID training settings that cannot train, before anything is built or loaded.

    ``names`` maps a parameter to what the message calls it (a command's option, e.g.
    ``{"epochs": "--epochs"}``).

    Raises
    ------
    InputError
        ``epochs``, ``batch_size`` or ``n_triplets`` below 1, ``lr`` not above 0, or fewer
        than two labels.
    """
    called = {"n_triplets": "the number of triplets", **(names or {})}
    if n_labels is not None and n_labels < 2:
        raise InputError(f"LAID needs at least two labels, got {n_labels}")
    for what, value in (("epochs", epochs), ("batch_size", batch_size), ("n_triplets", n_triplets)):
        if int(value) < 1:
            raise InputError(f"LAID training: {called.get(what, what)} must be >= 1, got {value}")
    if not float(lr) > 0:
        raise InputError(f"LAID training: {called.get('lr', 'lr')} must be > 0, got {lr}")


def train_laid(
    standard: ArrayLike,
    semantic_shift: ArrayLike,
    covariate_shift: ArrayLike,
    *,
    margin: float = 0.3,
    orth_weight: float = 1.0,
    epochs: int = 200,
    batch_size: int = 1024,
    lr: float = 1e-2,
    seed: int = 0,
    on_epoch: Callable[[int, float], Any] | None = None,
) -> LAID:
    """Train the LAID matrix on embeddings of triplets (each (n, l), l even).

    Initialised at the identity; Adam; deterministic for a seed on the CPU. ``on_epoch(k,
    loss)`` is called after each epoch k (1-based) with its last batch's loss (a progress bar).
    """
    import torch

    check_laid_options(epochs=epochs, batch_size=batch_size, lr=lr)
    st = np.asarray(standard, dtype=np.float32)
    ss = np.asarray(semantic_shift, dtype=np.float32)
    cs = np.asarray(covariate_shift, dtype=np.float32)
    if not (st.shape == ss.shape == cs.shape) or st.ndim != 2:
        raise InputError(
            f"triplet embeddings must share one (n, l) shape, got {st.shape}, {ss.shape}, "
            f"{cs.shape}"
        )
    n, dim = st.shape
    if dim % 2:
        raise InputError(f"the embedding dimension must be even, got {dim}")
    for name, arr in (("standard", st), ("semantic_shift", ss), ("covariate_shift", cs)):
        if not np.isfinite(arr).all():
            raise InputError(f"{name} embeddings contain NaN or inf")
    gen = torch.Generator().manual_seed(seed)
    half = dim // 2
    w = torch.nn.Parameter(torch.eye(dim))
    opt = torch.optim.Adam([w], lr=lr)
    t_st, t_ss, t_cs = (torch.from_numpy(x) for x in (st, ss, cs))
    eye = torch.eye(dim)
    last = float("nan")
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for lo in range(0, n, batch_size):
            idx = perm[lo : lo + batch_size]
            zs, zss, zcs = t_st[idx] @ w, t_ss[idx] @ w, t_cs[idx] @ w
            d = _cosine_distance_torch
            l_sem = torch.relu(
                d(zs[:, :half], zcs[:, :half]) - d(zs[:, :half], zss[:, :half]) + margin
            ).mean()
            l_cov = torch.relu(
                d(zs[:, half:], zss[:, half:]) - d(zs[:, half:], zcs[:, half:]) + margin
            ).mean()
            l_orth = ((w.T @ w - eye) ** 2).sum()
            loss = l_sem + l_cov + orth_weight * l_orth
            opt.zero_grad()
            loss.backward()
            opt.step()
            last = float(loss.detach())
        if on_epoch is not None:
            on_epoch(epoch + 1, last)
    return LAID(
        W=w.detach().numpy().astype(np.float64),
        meta={"margin": margin, "epochs": epochs, "lr": lr, "seed": seed, "final_loss": last},
    )


def embed_triplets(
    encoder: Any,
    labels: Sequence[str],
    *,
    templates: Sequence[str] = COVARIATE_TEMPLATES,
    n_triplets: int = 20_000,
    seed: int = 0,
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """Text embeddings (standard, semantic shift, covariate shift), (n_triplets, l) float32
    each, of :func:`laid_triplets`; each distinct text is embedded once."""
    check_laid_options(n_triplets=n_triplets)
    st, ss, cs = laid_triplets(labels, templates, n=n_triplets, seed=seed)
    texts = sorted(set(st) | set(ss) | set(cs))
    emb = np.asarray(encoder.encode(texts), dtype=np.float32)
    if emb.ndim != 2 or len(emb) != len(texts):
        raise InputError(f"the text encoder returned shape {emb.shape} for {len(texts)} texts")
    row = {t: i for i, t in enumerate(texts)}
    take = lambda group: emb[[row[t] for t in group]]  # noqa: E731
    return take(st), take(ss), take(cs)


def fit_laid_from_text(
    encoder: Any,
    labels: Sequence[str],
    *,
    templates: Sequence[str] = COVARIATE_TEMPLATES,
    n_triplets: int = 20_000,
    seed: int = 0,
    **train_kwargs: Any,
) -> LAID:
    """Train LAID on the text embeddings of ``n_triplets`` template x label triplets.

    ``encoder`` is any text encoder with ``encode(texts) -> (n, l)`` in the image-text space the
    LAID matrix will be applied to (a CLIP text tower, e.g. the open_clip adapter of
    :mod:`semshift.features.models`). Each distinct text is embedded once
    (:func:`embed_triplets`).
    """
    st, ss, cs = embed_triplets(
        encoder, labels, templates=templates, n_triplets=n_triplets, seed=seed
    )
    laid = train_laid(st, ss, cs, seed=seed, **train_kwargs)
    laid.meta = {
        **(laid.meta or {}),
        "labels": len(labels),
        "templates": len(templates),
        "triplets": n_triplets,
    }
    return laid


#: named template sets: ``covariate-48`` (:data:`COVARIATE_TEMPLATES`, semshift's default) and
#: ``clip-imagenet-80`` (the 80 prompts of OpenAI CLIP's ImageNet zero-shot notebook)
TEMPLATE_SETS = ("covariate-48", "clip-imagenet-80")


def clip_imagenet_templates() -> tuple[str, ...]:
    """The 80 ImageNet prompt templates of OpenAI CLIP's notebook
    ``Prompt_Engineering_for_ImageNet.ipynb`` (MIT licence), read from open_clip's copy
    (``open_clip.zero_shot_metadata.OPENAI_IMAGENET_TEMPLATES``), with ``{}`` for the label."""
    try:
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES
    except ImportError:
        raise InputError(
            "templates 'clip-imagenet-80' are read from open_clip: install semshift[vision]"
        ) from None
    return tuple(str(t("{}")) for t in OPENAI_IMAGENET_TEMPLATES)


def resolve_templates(spec: str | Path | Sequence[str]) -> tuple[str, ...]:
    """Prompt templates by name (:data:`TEMPLATE_SETS`), from a file or as given.

    A file holds one template per line (blank lines and lines starting with ``#`` skipped), each
    with exactly one ``{}`` where the label goes; at least two are needed.

    Raises
    ------
    InputError
        An unknown name that is no file, an unreadable file, a template without exactly one
        ``{}`` (named with its file and line), or fewer than two templates.
    """
    if not isinstance(spec, (str, Path)):
        found, where = [str(t) for t in spec], ["templates"] * len(spec)
        lines = list(range(1, len(found) + 1))
    elif str(spec) == "covariate-48":
        return COVARIATE_TEMPLATES
    elif str(spec) == "clip-imagenet-80":
        return clip_imagenet_templates()
    else:
        path = Path(spec)
        if not path.is_file():
            raise InputError(
                f"templates {str(spec)!r}: neither a template set ({', '.join(TEMPLATE_SETS)}) "
                "nor a file"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"templates {path}: cannot read ({err})") from None
        kept = [
            (k, line.strip())
            for k, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#")
        ]
        lines, found = [k for k, _ in kept], [t for _, t in kept]
        where = [str(path)] * len(found)
    for src, line, t in zip(where, lines, found, strict=True):
        if t.count("{}") != 1 or t.count("{") != 1 or t.count("}") != 1:
            raise InputError(f"{src} line {line}: template {t!r} must contain exactly one '{{}}'")
    if len(found) < 2:
        raise InputError(f"templates {spec}: LAID needs at least two templates, got {len(found)}")
    return tuple(found)
