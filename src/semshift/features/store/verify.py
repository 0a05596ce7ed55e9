"""Checking a store: :func:`verify_store` (every recorded file hashed again),
:func:`open_verified` (the one way a command opens stores), model identity checks and
:func:`repair_store`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semshift.errors import InputError

from ._io import checksum_matches
from ._meta import _shard_name, model_identity, read_meta

if TYPE_CHECKING:
    from .reader import FeatureStore


@dataclass(frozen=True)
class Damage:
    """One damaged part of a finished store (:func:`verify_store`).

    Attributes
    ----------
    shard : int or None
        The shard it belongs to; None for a file of the whole store (index, head).
    file : str
        The file, relative to the store's folder.
    problem : str
        What is wrong (missing, size or checksum differs from ``meta.json``, ...).
    """

    shard: int | None
    file: str
    problem: str

    def __str__(self) -> str:
        where = f"shard {self.shard} " if self.shard is not None else ""
        return f"{where}({self.file}: {self.problem})"


def _file_damage(root: Path, rel: str, info: Mapping[str, Any]) -> str | None:
    f = root / rel
    if not f.is_file():
        return "missing"
    size = info.get("size")
    if size is not None and f.stat().st_size != int(size):
        return f"{f.stat().st_size} bytes, meta.json records {size}"
    if not checksum_matches(f, info):
        return "checksum differs from meta.json"
    return None


#: Threads :func:`verify_store` hashes shard files on (at most; fewer CPUs, fewer threads).
_HASH_THREADS = 4


def verify_store(path: str | Path) -> list[Damage]:
    """Every damaged part of a finished store, by recomputing what ``meta.json`` records.

    Checked: each shard's files (arrays and per-shard index: presence, size, checksum), each
    shard's commit record (``shards/NNNNN.json``: present and agreeing with ``meta.json``), the
    head, the store's ``index.parquet`` (its checksum; stores written before it was
    recorded are compared with the shards' own indices instead) and ``skipped.csv`` (its
    checksum where ``meta.json`` records it; then, older stores too, its contents: a UTF-8 CSV
    of ``sample_id, path, reason`` with integer sample ids and ``n_skipped`` rows).

    Returns
    -------
    list of Damage
        Empty when the store is intact.

    Raises
    ------
    InputError
        ``path`` is not a finished store (unfinished: run the extraction again).
    """
    root = Path(path)
    meta = read_meta(root)
    out: list[Damage] = []
    intact_indices = True
    shards = meta.get("shards", [])
    files = [(f"shards/{info['file']}", info) for sh in shards for info in sh["files"].values()]
    # the shard files are hashed on a few threads (XXH3 releases the GIL; on 2 busy cores a
    # 1.6 GB store hashed in 0.17-0.25 s instead of 0.31 s on one)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(_HASH_THREADS, len(files), cpus or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="semshift-verify") as pool:
        problems = iter(list(pool.map(lambda f: _file_damage(root, *f), files)))
    for sh in shards:
        k = int(sh["shard"])
        for kind, info in sh["files"].items():
            problem = next(problems)
            if problem is not None:
                out.append(Damage(k, f"shards/{info['file']}", problem))
                intact_indices &= kind != "index"
        rec_file = root / "shards" / f"{_shard_name(k)}.json"
        rel = f"shards/{rec_file.name}"
        try:
            rec = json.loads(rec_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            out.append(Damage(k, rel, "commit record missing"))
            continue
        except (OSError, ValueError) as err:
            out.append(Damage(k, rel, f"commit record unreadable ({err})"))
            continue
        if not isinstance(rec, dict) or rec.get("files") != sh["files"]:
            out.append(Damage(k, rel, "commit record disagrees with meta.json"))
    head = meta.get("head") or {}
    if head.get("file") and (head.get("checksum") or head.get("sha256")):
        problem = _file_damage(root, head["file"], head)
        if problem is not None:
            out.append(Damage(None, head["file"], problem))
    index = meta.get("index")
    if isinstance(index, Mapping) and index.get("checksum"):
        problem = _file_damage(root, "index.parquet", index)
        if problem is not None:
            out.append(Damage(None, "index.parquet", problem))
    elif intact_indices:  # older stores: the index must equal the shards' own indices
        problem = _index_differs(root, meta)
        if problem is not None:
            out.append(Damage(None, "index.parquet", problem))
    problem = _skipped_damage(root, meta)
    if problem is not None:
        out.append(Damage(None, "skipped.csv", problem))
    return out


def _skipped_damage(root: Path, meta: Mapping[str, Any]) -> str | None:
    """What is wrong with ``skipped.csv``: its recorded checksum (where ``meta.json`` has
    one), then its contents (every store): a UTF-8 CSV of :data:`SKIPPED_COLUMNS` with integer
    sample ids, as many rows as ``meta.json``'s ``n_skipped``."""
    info = meta.get("skipped")
    if isinstance(info, Mapping) and info.get("checksum"):
        problem = _file_damage(root, "skipped.csv", info)
        if problem is not None:
            return problem
    rows = _skipped_rows(root / "skipped.csv")
    if isinstance(rows, str):
        return rows
    n = meta.get("n_skipped")
    if isinstance(n, int) and rows != n:
        return f"{rows} rows, meta.json records {n}"
    return None


#: A ``skipped.csv`` of a store that skipped no image, as the writer writes it (pandas'
#: ``to_csv``; also with Windows line ends)
_EMPTY_SKIPPED = {b"", b"sample_id,path,reason\n", b"sample_id,path,reason\r\n"}


def _skipped_rows(f: Path) -> int | str:
    """Rows of ``skipped.csv`` (:func:`read_skipped`'s checks), or what is wrong with it. The
    table of a store that skipped nothing is recognised without pandas; any other is parsed."""
    try:
        if not f.is_file() or (f.stat().st_size <= 32 and f.read_bytes() in _EMPTY_SKIPPED):
            return 0
    except OSError:
        pass  # read_skipped names the problem
    from .reader import _skipped_frame

    frame = _skipped_frame(f)
    return frame if isinstance(frame, str) else len(frame)


def model_mismatch(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of :func:`model_identity` in which two stores' ``meta.json`` disagree.

    Only the fields both record are compared: a store written without a head (or a model name)
    agrees on it with any store.

    Returns
    -------
    dict of str to (value in ``a``, value in ``b``)
        Empty when nothing recorded disagrees.
    """
    ia, ib = model_identity(a), model_identity(b)
    return {k: (ia[k], ib[k]) for k in ia if None not in (ia[k], ib[k]) and ia[k] != ib[k]}


def _describe_mismatch(diff: Mapping[str, tuple[Any, Any]]) -> str:
    def short(v: Any) -> str:  # checksums by their first 12 hex digits, names quoted
        digest = str(v).rsplit(":", 1)[-1]
        return digest[:12] if isinstance(v, str) and len(digest) > 24 else repr(v)

    return ", ".join(f"{k} {short(b)} vs {short(a)}" for k, (a, b) in diff.items())


def open_verified(
    stores: Mapping[str, str | Path],
    *,
    same_model: bool | Iterable[tuple[str, str]] = True,
) -> dict[str, FeatureStore]:
    """Open the stores a command reads: each verified in full, and of one model where asked.

    The one way a command opens stores (``semshift evaluate`` and ``run`` through
    :class:`semshift.run.verify.VerifiedStores`, ``ensemble``, ``splits ambiguity``, ``zsl
    run``). Every file ``meta.json`` records is hashed again on every call
    (:func:`verify_store`: shard arrays and indices, commit records, head, ``index.parquet``,
    ``skipped.csv``); nothing is remembered between calls, so a file changed in place with its
    size and modification time kept is refused too. The cost is one read of the store's files
    (XXH3 on up to four threads): a 1.60 GB store (131,072 rows x 1,000 logits + 2,048
    features, 32 files) verifies in 0.26-0.28 s from the page cache and 0.5-0.9 s with the
    page cache dropped, against 0.18-0.20 s and 0.9-1.3 s to read the same files without
    hashing (``python benchmarks/bench_verify.py``, 2 shared CPU cores of a virtual machine).
    See docs/methods.md#store-verification.

    Parameters
    ----------
    stores : mapping of str to path
        What each store is for, as the messages name it (``"--id-store"``, ``"--member 1"``,
        ``"data.id_test"``) -> its folder. A folder given under several names is verified once.
    same_model : bool or iterable of (str, str)
        True (default): every store comes from the classifier of the first (the recorded
        fields of :func:`model_identity` agree, see :func:`model_mismatch`); False: no check
        (an ensemble's members are different networks); pairs of names: the two stores of
        each pair come from one classifier (an ensemble member and its training store).

    Returns
    -------
    dict of str to FeatureStore
        In the order of ``stores``.

    Raises
    ------
    InputError
        One line: the name, the store and what is wrong: not a finished store, damaged (the
        damaged files, and the repair command), or from another model than the store it must
        agree with (both named, with the fields that differ).
    """
    from .reader import open_store

    out: dict[str, FeatureStore] = {}
    opened: dict[Path, FeatureStore] = {}
    for name, path in stores.items():
        key = Path(path).resolve()
        if key not in opened:
            try:
                damages = verify_store(path)
                if not damages:
                    opened[key] = open_store(path)
            except InputError as err:
                raise InputError(f"{name}: {err}") from None
            if damages:
                listed = ", ".join(str(d) for d in damages[:4])
                more = f" and {len(damages) - 4} more" if len(damages) > 4 else ""
                raise InputError(
                    f"{name}: feature store {path} is damaged: {listed}{more}; run `semshift "
                    f"store repair {path}`, then the extraction again (it recomputes only those "
                    "shards)"
                )
        out[name] = opened[key]
    names = list(out)
    if same_model is True:
        pairs = [(names[0], n) for n in names[1:]]
    else:
        pairs = [] if same_model is False else list(same_model)
    for a, b in pairs:
        diff = model_mismatch(out[a].meta, out[b].meta)
        if diff:
            raise InputError(
                f"{b}: store {out[b].path} comes from another model than {a} (store "
                f"{out[a].path}): {_describe_mismatch(diff)}; these stores must come from one "
                "classifier"
            )
    return out


def _index_differs(root: Path, meta: Mapping[str, Any]) -> str | None:
    import numpy as np
    import pandas as pd

    try:
        index = pd.read_parquet(root / "index.parquet")
    except Exception as err:  # any failure of the parquet reader means damage
        return f"unreadable ({type(err).__name__})"
    frames = []
    for sh in meta.get("shards", []):
        part = pd.read_parquet(root / "shards" / sh["files"]["index"]["file"])
        part["shard"] = np.int32(sh["shard"])
        part["row"] = np.arange(len(part), dtype=np.int32)
        frames.append(part)
    if not frames:
        return None
    want = pd.concat(frames, ignore_index=True)
    want = want[[c for c in index.columns if c in want.columns]]
    if len(want) != len(index) or not want.equals(index[want.columns]):
        return "differs from the shards' own indices"
    return None


def _repair_meta(root: Path, problem: str) -> RepairResult:
    """:func:`repair_store` for a store whose ``meta.json`` cannot be read (``problem``)."""
    from semshift.textio import read_json

    from .writer import _ShardRecord

    run_file = root / "run.json"
    try:
        run = read_json(run_file, "extraction record", hint="")
    except InputError as err:
        raise InputError(
            f"{problem}; it cannot be rebuilt: {err} (run.json records the settings the shards "
            f"were extracted with). Nothing in {root} can be recovered: extract the store "
            "again into a new folder (or delete this one first)"
        ) from None
    if not isinstance(run, dict):
        raise InputError(
            f"{problem}; it cannot be rebuilt: {run_file} is not an extraction record (a JSON "
            f"object). Extract the store again into a new folder (or delete this one first)"
        )
    damages = [Damage(None, "meta.json", problem.removeprefix(f"{root / 'meta.json'}: "))]
    kept, removed = 0, []
    for rec_file in sorted((root / "shards").glob("[0-9]*.json")):
        try:
            rec = _ShardRecord.from_json(json.loads(rec_file.read_text(encoding="utf-8")))
            intact = rec.shard == int(rec_file.stem) and all(
                (root / "shards" / info["file"]).is_file()
                and checksum_matches(root / "shards" / info["file"], info)
                for info in rec.files.values()
            )
        except (OSError, ValueError, KeyError, TypeError):
            rec, intact = None, False
        if intact:
            kept += 1
            continue
        k = int(rec_file.stem) if rec_file.stem.isdigit() else -1
        removed.append(k)
        damages.append(Damage(k, f"shards/{rec_file.name}", "files differ from this record"))
        for info in rec.files.values() if rec is not None else ():
            (root / "shards" / str(info.get("file", ""))).unlink(missing_ok=True)
        rec_file.unlink(missing_ok=True)
    (root / "meta.json").unlink()  # first of the store-wide files: unfinished from here on
    for name in ("index.parquet", "head.npz", "skipped.csv"):
        (root / name).unlink(missing_ok=True)
    return RepairResult(sorted(removed), kept, damages)


@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_store` removed.

    Attributes
    ----------
    removed_shards : list of int
        Shards whose files and commit records were removed (recomputed by the next extraction).
    kept_shards : int
        Intact shards the next extraction keeps.
    damages : list of Damage
        What :func:`verify_store` found.
    """

    removed_shards: list[int]
    kept_shards: int
    damages: list[Damage]


def repair_store(path: str | Path) -> RepairResult:
    """Make a damaged store resumable so that the next extraction recomputes only the damage.

    The damaged shards' files and commit records are removed, and so are the store-wide files
    (``meta.json``, ``index.parquet``, ``head.npz``, ``skipped.csv``) that the extraction
    writes again when it finishes; the extraction's record (``run.json``) and the intact
    shards stay. Running the same extraction again (the same ``semshift extract`` command, or
    the ``semshift run`` whose cache holds the store) then recomputes only the removed shards.
    An intact store is left as it is.

    A ``meta.json`` that cannot be read is rebuilt the same way: it and the other store-wide
    files are removed, each shard is checked against its own commit record
    (``shards/NNNNN.json``) and the damaged ones removed, and the next extraction writes
    ``meta.json`` again from ``run.json`` and the kept shards.

    Raises
    ------
    InputError
        Not a finished store, or a store without a readable extraction record (``run.json``),
        which could not be resumed (the message says what cannot be recovered).
    """
    root = Path(path)
    try:
        damages = verify_store(root)
        meta = read_meta(root)
    except InputError as err:
        if not (root / "meta.json").is_file():
            raise  # not a finished store (unfinished, or no store at all)
        # meta.json unreadable: rebuilt by the extraction (the message's repair hint dropped)
        return _repair_meta(root, str(err).split("; `semshift store repair")[0])
    if not damages:
        return RepairResult([], len(meta.get("shards", [])), [])
    if not (root / "run.json").is_file():
        raise InputError(
            f"{root}: no run.json (the extraction's record), so no extraction can resume it; "
            "extract the store again into a new folder"
        )
    bad = sorted({d.shard for d in damages if d.shard is not None})
    by_shard = {int(sh["shard"]): sh for sh in meta.get("shards", [])}
    (root / "meta.json").unlink()  # first: the store is unfinished from here on
    for k in bad:
        for info in by_shard[k]["files"].values():
            (root / "shards" / info["file"]).unlink(missing_ok=True)
        (root / "shards" / f"{_shard_name(k)}.json").unlink(missing_ok=True)
    for name in ("index.parquet", "head.npz", "skipped.csv"):
        (root / name).unlink(missing_ok=True)
    return RepairResult(bad, len(by_shard) - len(bad), damages)
