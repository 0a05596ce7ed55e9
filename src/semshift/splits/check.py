"""The split leak checker: class and image overlaps that make a benchmark number wrong.

:func:`check_split` checks a split manifest; :func:`check_class_disjoint` checks that the
classes of validation sets (the OOD set a hyperparameter search selects on) are unrelated to
every test class: no shared id and, with a taxonomy, no shared node, ancestor or descendant.

For any manifest it checks:

``class_overlap``
    a class in two class sets that must be disjoint. The sets are ``known`` and every bin; the
    pairs are the manifest's ``disjoint`` list when it has one, else every pair.
``image_path_overlap`` / ``image_content_overlap``
    the same image (same normalised path, or same bytes under another path: a copied file) in two
    image sets that must be disjoint (every pair except the manifest's ``image_subsets``). This
    catches train or val sets that contain test-seen images, the bug of the first proposed splits.
``image_class_mismatch``
    an image whose class is not in the class set of its image set (``image_classes`` in the
    manifest maps image sets to class sets; by default an image set maps to the class set of
    the same name, when there is one).
``unreadable_image``
    an image that could not be read for content hashing.

Content hashes (SHA-256) are computed only for files whose size equals that of a file in another
set, so large image sets are cheap to check.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

from semshift.errors import InputError
from semshift.splits.manifest import SplitManifest
from semshift.textio import read_csv, read_text

if TYPE_CHECKING:
    import pandas as pd

    from semshift.taxonomy import Taxonomy

__all__ = [
    "CLASS_LEAK_KINDS",
    "LeakReport",
    "check_class_disjoint",
    "check_split",
    "check_split_rows",
]

COLUMNS = ["kind", "set_a", "set_b", "item", "detail"]

Row = tuple[str, str, str, str, str]


@dataclass
class LeakReport:
    """Violations found by :func:`check_split`, one row each (``kind, set_a, set_b, item,
    detail``), and what was checked."""

    violations: pd.DataFrame
    checked: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.violations.empty

    def summary(self) -> pd.DataFrame:
        """Count of violations per kind and pair of sets."""
        import pandas as pd

        if self.violations.empty:
            return pd.DataFrame(columns=["kind", "set_a", "set_b", "count", "first"])
        g = self.violations.groupby(["kind", "set_a", "set_b"], sort=False)
        return g["item"].agg(count="size", first="first").reset_index()


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_split(
    manifest: SplitManifest | str | Path,
    images: pd.DataFrame | str | Path | None = None,
    *,
    root: str | Path | None = None,
    hash_content: bool = True,
) -> LeakReport:
    """Check a split manifest (and optionally its image sets) for leaks.

    Parameters
    ----------
    manifest : a SplitManifest, a ``split.json`` path or a directory holding one
    images : image table with ``path`` and ``set`` columns (``class`` optional), or a CSV path.
        Default: the manifest's ``images`` file when it names one.
    root : directory that relative image paths are resolved against (default: the manifest's
        ``image_root``, else the image table's folder)
    hash_content : also compare file contents (SHA-256) to catch copied files
    """
    import pandas as pd

    rows, checked = check_split_rows(manifest, images, root=root, hash_content=hash_content)
    return LeakReport(violations=pd.DataFrame(rows, columns=COLUMNS), checked=checked)


def check_split_rows(
    manifest: SplitManifest | str | Path,
    images: pd.DataFrame | str | Path | None = None,
    *,
    root: str | Path | None = None,
    hash_content: bool = True,
    plain: bool = True,
) -> tuple[list[Row], dict[str, int]]:
    """:func:`check_split`'s violations as rows ``(kind, set_a, set_b, item, detail)``, and
    what was checked, without pandas where it can (``semshift splits check``: importing
    pandas costs 0.4 s).

    An image table read from a CSV file is read by the ``csv`` module where it reads it as
    pandas does (a header of distinct, non-empty names and every row as many fields); any
    other file (blank or ragged lines, quotes), or ``plain=False``, is read with pandas. The
    checks are the same code on the table's columns either way (a test compares the rows).
    """
    base: Path | None = None
    if not isinstance(manifest, SplitManifest):
        mpath = Path(manifest)
        base = mpath if mpath.is_dir() else mpath.parent
        manifest = SplitManifest.read(mpath)
    if images is None and isinstance(manifest.extra.get("images"), str) and base is not None:
        images = base / manifest.extra["images"]
    rows: list[Row] = []

    class_sets: dict[str, set[str]] = {"known": set(manifest.known)}
    for name, ids in manifest.bins.items():
        class_sets[name] = set(ids)
    pairs = manifest.extra.get("disjoint")
    if pairs is None:
        pairs = [list(p) for p in combinations(class_sets, 2)]
    for pair in pairs:
        if len(pair) != 2 or any(p not in class_sets for p in pair):
            raise InputError(f"manifest 'disjoint' entry {pair} must name two class sets")
        a, b = pair
        for cls in sorted(class_sets[a] & class_sets[b]):
            rows.append(("class_overlap", a, b, cls, "class in both sets"))
    checked = {"class_sets": len(class_sets), "class_pairs": len(pairs)}

    if images is not None:
        frame: pd.DataFrame | None = None
        table: dict[str, list[str]] | None = None
        if isinstance(images, str | os.PathLike):
            ipath = Path(images)
            text = read_text(ipath, "image table")
            table = _plain_table(text) if plain else None
            if table is None:
                frame = read_csv(ipath, "image table", text=text, dtype=str, keep_default_na=False)
            stored = manifest.extra.get("image_root")
            img_base = (
                Path(root)
                if root is not None
                else Path(stored)
                if isinstance(stored, str)
                else ipath.parent
            )
        else:
            frame = images.copy()
            img_base = Path(root) if root is not None else Path.cwd()
        columns = set(table) if table is not None else set(_frame(frame).columns)
        missing = {"path", "set"} - columns
        if missing:
            raise InputError(f"image table needs columns path and set (missing {sorted(missing)})")
        subsets = manifest.extra.get("image_subsets", [])
        allowed = {frozenset(p) for p in subsets}
        if table is None:  # one check for both readers: the frame's columns as lists
            table = {str(c): v.tolist() for c, v in _frame(frame).items()}
            table["path"] = [str(v) for v in table["path"]]
        rows += _image_rows(table, img_base, allowed, manifest, class_sets, hash_content, checked)
    return rows, checked


def _frame(frame: pd.DataFrame | None) -> pd.DataFrame:
    if frame is None:  # pragma: no cover - a table read by csv has no frame
        raise AssertionError("no image frame")
    return frame


def _plain_table(text: str) -> dict[str, list[str]] | None:
    """The columns of a CSV text as pandas reads it (``dtype=str, keep_default_na=False``),
    or None where the two readers could differ: a blank or whitespace-only line, a row with
    another number of fields than the header, an empty or repeated column name, a quote
    character (quoted fields: pandas reads them), a NUL or a lone carriage return."""
    if "\0" in text or '"' in text or "\r" in text.replace("\r\n", "\n"):
        return None
    try:
        parsed = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error:
        return None
    if not parsed:
        return None
    header, body = parsed[0], parsed[1:]
    if len(set(header)) != len(header) or any(not h or h != h.strip() for h in header):
        return None
    for row in parsed:
        if len(row) != len(header) or (len(row) == 1 and not row[0].strip()):
            return None
    return {name: [row[k] for row in body] for k, name in enumerate(header)}


def _pairs_overlap_plain(
    keys: list[str], sets: list[str], allowed: set[frozenset[str]], kind: str, detail: str
) -> list[Row]:
    """Rows ``(kind, set_a, set_b, key, detail)`` for each key shared by two sets whose pair is
    not ``allowed`` (keys sorted; the rows are ``zip(keys, sets)``)."""
    by_key: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for key, name in zip(keys, sets, strict=True):
        if (key, name) not in seen:
            seen.add((key, name))
            by_key.setdefault(key, []).append(name)
    out = []
    for value in sorted(k for k, names in by_key.items() if len(names) > 1):
        for a, b in combinations(sorted(by_key[value]), 2):
            if frozenset((a, b)) not in allowed:
                out.append((kind, a, b, str(value), detail))
    return out


def _image_rows(
    table: dict[str, list[str]],
    img_base: Path,
    allowed: set[frozenset[str]],
    manifest: SplitManifest,
    class_sets: dict[str, set[str]],
    hash_content: bool,
    checked: dict[str, int],
) -> list[Row]:
    """The image checks of :func:`check_split_rows` on a table of columns (lists)."""
    rows: list[Row] = []
    paths, sets = table["path"], table["set"]
    full = [p if os.path.isabs(p) else os.path.normpath(os.path.join(img_base, p)) for p in paths]
    rows += _pairs_overlap_plain(full, sets, allowed, "image_path_overlap", "same file path")
    if hash_content:
        sizes: list[int] = []
        for i, p in enumerate(full):
            try:
                sizes.append(os.path.getsize(p))
            except OSError:
                sizes.append(-1)
                rows.append(("unreadable_image", sets[i], "", p, "cannot read"))
        ok = [i for i, size in enumerate(sizes) if size >= 0]
        sets_of_size: dict[int, set[str]] = {}
        for i in ok:
            sets_of_size.setdefault(sizes[i], set()).add(sets[i])
        cand: list[int] = []
        pairs: set[tuple[str, str]] = set()
        for i in ok:
            if len(sets_of_size[sizes[i]]) > 1 and (full[i], sets[i]) not in pairs:
                pairs.add((full[i], sets[i]))
                cand.append(i)
        digests = [_sha256(full[i]) for i in cand]
        content = _pairs_overlap_plain(
            digests, [sets[i] for i in cand], allowed, "image_content_overlap", ""
        )
        files: dict[str, set[str]] = {}
        for i, digest in zip(cand, digests, strict=True):
            files.setdefault(digest, set()).add(full[i])
        for kind, a, b, digest, _ in content:
            joined = " = ".join(sorted(files[digest]))
            if " = " in joined:
                rows.append((kind, a, b, joined, f"sha256 {digest[:12]}"))
        checked["hashed_images"] = len(cand)
    if "class" in table:
        classes = table["class"]
        mapping = dict(manifest.extra.get("image_classes", {}))
        for s in dict.fromkeys(sets):
            if s not in mapping and s in class_sets:
                mapping[s] = s
        for s, cset in mapping.items():
            if cset not in class_sets:
                continue
            for p, c, name in zip(paths, classes, sets, strict=True):
                if name == s and c not in class_sets[cset]:
                    detail = f"class {c} is not in '{cset}'"
                    rows.append(("image_class_mismatch", s, cset, p, detail))
    checked["images"] = len(paths)
    checked["image_sets"] = len(set(sets))
    return rows


#: The kinds of :func:`check_class_disjoint` violations, from the most direct.
CLASS_LEAK_KINDS = ("class_overlap", "same_node", "test_ancestor", "test_descendant")


def check_class_disjoint(
    val: Mapping[str, Iterable[str]],
    test: Mapping[str, Iterable[str]],
    taxonomy: Taxonomy | None = None,
) -> LeakReport:
    """Check that validation classes are unrelated to every test class.

    A violation (one row each, ``set_a`` the validation set, ``set_b`` the test set, ``item``
    the validation class) is:

    ``class_overlap``
        the same class id in both sets;
    ``same_node``
        two different ids that name the same taxonomy node (a wnid and its synset name
        ``dog.n.01``, or a unique lemma);
    ``test_ancestor``
        a test class that is an ancestor of a validation class (a hypernym in WordNet: a
        validation "Chihuahua" with a test "dog");
    ``test_descendant``
        a test class that is a descendant of a validation class.

    The taxonomy checks apply to the classes the taxonomy knows (by id, alias or unique
    name); ``checked`` counts how many of each side it knew.

    Parameters
    ----------
    val, test : mapping of str to iterable of str
        Set name -> the class ids of its rows (repeats are fine).
    taxonomy : Taxonomy, optional
        WordNet or a custom hierarchy (:func:`semshift.taxonomy.load_taxonomy`); None checks
        class ids only.

    Returns
    -------
    LeakReport
        ``ok`` when nothing is shared.

    Examples
    --------
    >>> from semshift.taxonomy import wordnet
    >>> report = check_class_disjoint({"val": ["n02085620"]}, {"far": ["n02084071"]}, wordnet())
    >>> report.violations[["kind", "item"]].values.tolist()
    [['test_ancestor', 'n02085620']]
    """
    val_ids = {name: sorted({str(c) for c in ids}) for name, ids in val.items()}
    test_ids = {name: sorted({str(c) for c in ids}) for name, ids in test.items()}
    rows: list[tuple[str, str, str, str, str]] = []
    for vs, vids in val_ids.items():
        for ts, tids in test_ids.items():
            for cls in sorted(set(vids) & set(tids)):
                rows.append(("class_overlap", vs, ts, cls, f"class {cls} is in both sets"))
    checked = {
        "val_classes": len({c for ids in val_ids.values() for c in ids}),
        "test_classes": len({c for ids in test_ids.values() for c in ids}),
    }
    if taxonomy is not None:
        tax = taxonomy

        def nodes(sets: Mapping[str, list[str]]) -> dict[str, int]:
            known = {c for ids in sets.values() for c in ids if c in tax}
            return {c: tax.index(c) for c in sorted(known)}

        val_nodes, test_nodes = nodes(val_ids), nodes(test_ids)
        checked["val_classes_in_taxonomy"] = len(val_nodes)
        checked["test_classes_in_taxonomy"] = len(test_nodes)
        every = {**val_nodes, **test_nodes}
        anc = {c: set(tax.indices(tax.ancestors(i, include_self=True))) for c, i in every.items()}

        def name(c: str) -> str:
            label = tax.label(c)
            return f"{c} ({label})" if label != c else c

        for vs, vids in val_ids.items():
            for ts, tids in test_ids.items():
                for v in vids:
                    if v not in val_nodes:
                        continue
                    rv = val_nodes[v]
                    for t in tids:
                        if t not in test_nodes or t == v:
                            continue
                        rt = test_nodes[t]
                        if rt == rv:
                            kind, how = "same_node", f"is the same {tax.name} node as"
                        elif rt in anc[v]:
                            kind, how = "test_ancestor", f"is an ancestor in {tax.name} of"
                        elif rv in anc[t]:
                            kind, how = "test_descendant", f"is a descendant in {tax.name} of"
                        else:
                            continue
                        detail = f"test class {name(t)} {how} validation class {name(v)}"
                        rows.append((kind, vs, ts, v, detail))
    import pandas as pd

    order = {k: i for i, k in enumerate(CLASS_LEAK_KINDS)}
    rows.sort(key=lambda r: (order[r[0]], r[1], r[2], r[3], r[4]))
    return LeakReport(violations=pd.DataFrame(rows, columns=COLUMNS), checked=checked)
