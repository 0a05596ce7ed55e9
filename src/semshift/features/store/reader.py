"""Reading a store: :class:`FeatureStore` (arrays memory-mapped, the index in pandas),
:class:`Selection` (rows by position, read in blocks with the next shard prefetched),
:func:`open_store`, :func:`read_meta`, :func:`read_skipped` and :func:`concat_stores`."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from semshift.errors import InputError, close_matches

from ._io import (
    DEFAULT_BLOCK_ROWS,
    FORMAT_VERSION,
    RESERVED_COLUMNS,
    checksum_matches,
    recorded_checksum,
)
from ._meta import read_meta

if TYPE_CHECKING:
    from ._io import F32


# --------------------------------------------------------------------------- reader
@dataclass(frozen=True)
class _Shard:
    root: Path  # the shards/ folder
    number: int
    rows: int
    files: Mapping[str, Mapping[str, Any]]


def _schema(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What two stores must share to be concatenated."""
    classes = meta.get("classes") or {}
    head = meta.get("head") or {}
    return {
        "arrays": meta.get("arrays"),
        "model": meta.get("model"),
        "layer": meta.get("layer"),
        "weights": meta.get("weights"),
        "preprocessing": meta.get("preprocessing"),
        "classes": classes.get("ids") if isinstance(classes, Mapping) else classes,
        "head": head.get("checksum", head.get("sha256")),
    }


class FeatureStore:
    """An opened store (see the module docstring); use :func:`open_store` to get one.

    Attributes
    ----------
    path : Path or None
        Directory (``None`` for a concatenation of several stores).
    meta : dict
        The contents of ``meta.json``.
    index : DataFrame
        One row per sample: ``sample_id``, ``path``, ``label``, ``shard``, ``row`` and the group
        columns. Read on first use: labels and group selections read only their own columns
        (the ``path`` column of a large store is most of the index).
    skipped : DataFrame
        The manifest of skipped images: ``sample_id``, ``path``, ``reason``.
    """

    def __init__(
        self,
        path: Path | None,
        meta: dict[str, Any],
        index: pd.DataFrame | None,
        shards: list[_Shard],
        skipped: pd.DataFrame,
        head_file: Path | None,
        *,
        index_file: Path | None = None,
        columns: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.meta = meta
        self.skipped = skipped
        self._index = index
        self._index_file = index_file
        self._columns = list(index.columns) if index is not None else list(columns)
        self._column_cache: dict[str, pd.Series] = {}
        self._labels: NDArray[np.int64] | None = None
        self._shards = shards
        self._head_file = head_file
        self._head: tuple[F32, F32] | None = None
        self._mmaps: dict[tuple[int, str], np.ndarray] = {}
        self._offsets = np.concatenate([[0], np.cumsum([s.rows for s in shards])]).astype(np.int64)

    # ---------------------------------------------------------------- index
    @property
    def index(self) -> pd.DataFrame:
        if self._index is None:
            self._index = self._read_index(None)
            self._column_cache.clear()
        return self._index

    def _column(self, name: str) -> pd.Series:
        """One index column, read alone from ``index.parquet`` while the index is not loaded."""
        if self._index is not None:
            return self._index[name]
        col = self._column_cache.get(name)
        if col is None:
            col = self._column_cache[name] = self._read_index([name])[name]
        return col

    def _read_index(self, columns: list[str] | None) -> pd.DataFrame:
        f = self._index_file
        assert f is not None, "a store without an index frame has an index file"
        try:
            frame = pd.read_parquet(f, columns=columns)
        except (OSError, ValueError) as err:
            raise InputError(f"{f}: unreadable ({err})") from None
        if len(frame) != len(self):
            raise InputError(
                f"{f}: {len(frame)} rows but the shards hold {len(self)}; the store is damaged "
                "(semshift store repair)"
            )
        return frame

    # ---------------------------------------------------------------- description
    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __repr__(self) -> str:
        where = self.path if self.path is not None else "<concatenation>"
        shapes = ", ".join(f"{k} {tuple(v['shape'])}" for k, v in self.array_specs.items())
        return f"FeatureStore({where}: {len(self)} rows; {shapes}; groups {self.groups})"

    @property
    def n_shards(self) -> int:
        return len(self._shards)

    @property
    def array_specs(self) -> dict[str, dict[str, Any]]:
        """Array name -> ``{"shape": per-row shape, "dtype": "float32"}``."""
        return dict(self.meta["arrays"])

    @property
    def array_names(self) -> list[str]:
        return list(self.meta["arrays"])

    @property
    def groups(self) -> list[str]:
        """The free group columns of the index."""
        return [c for c in self._columns if c not in RESERVED_COLUMNS]

    @property
    def labels(self) -> NDArray[np.int64]:
        """Labels of all rows, (n,) int64 (-1 = unknown); read-only."""
        if self._labels is None:
            labels = self._column("label").to_numpy(np.int64, copy=True)
            labels.flags.writeable = False
            self._labels = labels
        return self._labels

    @property
    def head(self) -> tuple[F32, F32]:
        """The linear head ``(W, b)``: W (C, D), b (C,), float32.

        Raises
        ------
        InputError
            The store has no head (e.g. written without one).
        """
        if self._head is None:
            if self._head_file is None:
                raise InputError(f"{self._where()} has no head (head.npz)")
            with np.load(self._head_file, allow_pickle=False) as z:
                self._head = (z["W"].astype(np.float32), z["b"].astype(np.float32))
        return self._head

    @property
    def has_head(self) -> bool:
        return self._head_file is not None

    def _where(self) -> str:
        return f"store {self.path}" if self.path is not None else "the concatenated store"

    # ---------------------------------------------------------------- arrays
    def _array(self, shard: int, name: str, scattered: bool = False) -> np.ndarray:
        """Shard ``shard``'s array ``name``, memory-mapped read-only on first use.

        ``scattered=True`` gives a second map advised ``MADV_RANDOM``: gathering rows spread over
        a shard then reads only those pages, not the kernel's read-ahead around each of them
        (measured: every 100th row of a 2.6 GB shard in 0.06 s instead of 7 s).
        """
        key = (shard, name + "#scattered" if scattered else name)
        arr = self._mmaps.get(key)
        if arr is not None:
            return arr
        if scattered:
            arr = self._array(shard, name)
            if isinstance(arr, np.memmap):
                arr = np.load(arr.filename, mmap_mode="r", allow_pickle=False)  # type: ignore[arg-type]
                raw = getattr(arr, "_mmap", None)
                if raw is not None and hasattr(mmap, "MADV_RANDOM"):
                    raw.madvise(mmap.MADV_RANDOM)
            self._mmaps[key] = arr
            return arr
        sh = self._shards[shard]
        tail = tuple(self.meta["arrays"][name]["shape"])
        if sh.rows == 0:
            arr = np.zeros((0, *tail), np.float32)
        else:
            f = sh.root / sh.files[name]["file"]
            try:
                arr = np.load(f, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as err:
                raise InputError(f"{f}: cannot read shard array ({err})") from None
            if arr.shape != (sh.rows, *tail) or arr.dtype != np.float32:
                raise InputError(
                    f"{f}: shard array has shape {arr.shape} and dtype {arr.dtype}, meta.json "
                    f"says {(sh.rows, *tail)} float32; the store is damaged (semshift store repair)"
                )
        self._mmaps[key] = arr
        return arr

    def _prefetch(self, shard: int, names: Sequence[str]) -> Future[None] | None:
        """Read shard ``shard``'s ``names`` files into the page cache on a background thread.

        Returns the job's future (``None`` when there is nothing to read).

        Sequential block iteration calls this for the next shard while the current one is being
        consumed, so the read of one shard overlaps the work on the previous one (a single large
        ``.npy`` gets the same from the kernel's read-ahead, which restarts small at each new
        file). Best effort: where ``os.preadv`` is missing nothing is read ahead, and an I/O
        error is ignored here and surfaces, if real, when the shard is mapped.
        """
        if not hasattr(os, "preadv") or not 0 <= shard < len(self._shards):
            return None
        sh = self._shards[shard]
        files = [sh.root / sh.files[n]["file"] for n in names if n in sh.files and sh.rows]
        return _PREFETCH.submit(_read_ahead, files) if files else None

    def _check_names(self, names: Sequence[str]) -> None:
        for name in names:
            if name not in self.meta["arrays"]:
                close = close_matches(name, self.array_names, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(
                    f"{self._where()} has no array {name!r}{hint}; it has "
                    f"{', '.join(self.array_names)}"
                )

    def gather(self, positions: NDArray[np.integer[Any]], name: str) -> np.ndarray:
        """Rows ``positions`` (increasing positions in :attr:`index`) of array ``name``.

        A run of consecutive rows inside one shard is returned as a read-only memory-mapped view
        (no copy); anything else is gathered into a new array of just those rows.

        Returns
        -------
        array (len(positions), ...) float32
        """
        self._check_names([name])
        pos = np.asarray(positions, dtype=np.int64)
        tail = tuple(self.meta["arrays"][name]["shape"])
        if pos.size == 0:
            return np.zeros((0, *tail), np.float32)
        shard_of = np.searchsorted(self._offsets, pos, side="right") - 1
        first, last = int(shard_of[0]), int(shard_of[-1])
        contiguous = pos[-1] - pos[0] + 1 == pos.size
        if first == last and contiguous:
            lo = int(pos[0] - self._offsets[first])
            return self._array(first, name)[lo : lo + pos.size]
        out = np.empty((pos.size, *tail), np.float32)
        bounds = np.searchsorted(shard_of, np.arange(first, last + 2))
        for j, s in enumerate(range(first, last + 1)):
            a, b = int(bounds[j]), int(bounds[j + 1])
            if a == b:
                continue
            local = pos[a:b] - self._offsets[s]
            span = int(local[-1] - local[0] + 1)
            if span == b - a:
                out[a:b] = self._array(s, name)[int(local[0]) : int(local[-1]) + 1]
            else:  # sparse selections: no read-ahead around each row
                out[a:b] = self._array(s, name, scattered=(b - a) < span // 4)[local]
        return out

    # ---------------------------------------------------------------- selection
    def all(self) -> Selection:
        """Every row, as a :class:`Selection`."""
        return Selection(self, np.arange(len(self), dtype=np.int64))

    def select(self, mask: Any = None, /, **groups: Any) -> Selection:
        """Rows whose group columns have the given values (all conditions must hold).

        Parameters
        ----------
        mask : boolean array (n,), optional
            An extra row mask over :attr:`index`.
        **groups
            Column name -> a value or a list/tuple/set of accepted values, e.g.
            ``select(split="ood", sem_level=[1, 2])``. ``label`` and ``path`` work too.

        Raises
        ------
        InputError
            A column does not exist.
        """
        keep = np.ones(len(self), dtype=bool)
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != bool or m.shape != (len(self),):
                raise InputError(
                    f"select(): the mask must be a boolean array of shape ({len(self)},), "
                    f"got {m.dtype} {m.shape}"
                )
            keep &= m
        for col, value in groups.items():
            if col not in self._columns:
                close = close_matches(col, self._columns, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise InputError(
                    f"select(): {self._where()} has no column {col!r}{hint}; group columns: "
                    f"{', '.join(self.groups) or 'none'}"
                )
            values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
            keep &= self._column(col).isin(values).to_numpy()
        return Selection(self, np.flatnonzero(keep))

    def arrays(self, *names: str) -> tuple[np.ndarray, ...]:
        """``self.all().arrays(*names)``."""
        return self.all().arrays(*names)

    def blocks(self, *names: str, rows: int = DEFAULT_BLOCK_ROWS) -> Iterator[dict[str, Any]]:
        """``self.all().blocks(*names, rows=rows)``."""
        return self.all().blocks(*names, rows=rows)

    def verify(self) -> None:
        """Recompute every shard file's checksum and compare with ``meta.json``.

        Raises
        ------
        InputError
            A file is missing or its checksum differs (naming the file).
        """
        for sh in self._shards:
            for info in sh.files.values():
                f = sh.root / info["file"]
                hint = f"; run `semshift store repair {self.path}`" if self.path else ""
                if not f.is_file():
                    raise InputError(f"{f}: shard file missing{hint}")
                if not checksum_matches(f, info):
                    raise InputError(
                        f"{f}: checksum differs from meta.json; the store is damaged{hint}"
                    )

    def checksums(self) -> dict[str, str]:
        """Shard file name -> checksum recorded in ``meta.json`` (``"xxh3_128:<hex>"``)."""
        return {
            info["file"]: recorded_checksum(info)
            for sh in self._shards
            for info in sh.files.values()
        }


class Selection:
    """A subset of a store's rows (in store order); arrays are read only when asked for.

    Attributes
    ----------
    store : FeatureStore
    positions : array (n,) int64
        Increasing row positions in ``store.index``.
    """

    def __init__(self, store: FeatureStore, positions: NDArray[np.int64]) -> None:
        self.store = store
        self.positions = positions

    def __len__(self) -> int:
        return int(self.positions.size)

    def __repr__(self) -> str:
        return f"Selection({len(self)} of {len(self.store)} rows)"

    @property
    def index(self) -> pd.DataFrame:
        """The index rows of the selection."""
        return self.store.index.iloc[self.positions]

    @property
    def labels(self) -> NDArray[np.int64]:
        """(n,) int64 labels (-1 = unknown)."""
        return self.store.labels[self.positions]

    def select(self, mask: Any = None, /, **groups: Any) -> Selection:
        """Narrow the selection further (same arguments as :meth:`FeatureStore.select`)."""
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != bool or m.shape != (len(self),):
                raise InputError(
                    f"select(): the mask must be a boolean array of shape ({len(self)},), "
                    f"got {m.dtype} {m.shape}"
                )
            full = np.zeros(len(self.store), bool)
            full[self.positions[m]] = True
        else:
            full = None
        inner = self.store.select(full, **groups)
        return Selection(self.store, np.intersect1d(self.positions, inner.positions))

    def arrays(self, *names: str) -> tuple[np.ndarray, ...]:
        """Plain arrays of the selected rows, one per name, in the order given.

        Parameters
        ----------
        *names : str
            Array names, e.g. ``"logits"`` (n, C) and ``"features"`` (n, D).

        Returns
        -------
        tuple of array (n, ...) float32
            NumPy arrays any detector or metric accepts. A selection that is one contiguous run of
            rows within a shard comes back as a read-only memory map (no copy); otherwise only the
            selected rows are read into memory.
        """
        if not names:
            raise InputError("arrays(): name at least one array, e.g. arrays('logits')")
        return tuple(self.store.gather(self.positions, name) for name in names)

    def inputs(self, *names: str) -> dict[str, Any]:
        """Keyword arguments for ``Detector.fit`` / ``Detector.score``.

        Parameters
        ----------
        *names : str
            Any of ``"logits"``, ``"features"``, ``"head"`` (the pair (W, b)) and ``"labels"``;
            default: logits, features, plus head when the store has one.

        Examples
        --------
        ``detector.fit(**sel.inputs("features", "head", "labels"))``
        """
        names = names or (
            "logits",
            "features",
            *(("head",) if self.store.has_head else ()),
        )
        out: dict[str, Any] = {}
        for name in names:
            if name == "head":
                out["head"] = self.store.head
            elif name == "labels":
                out["labels"] = self.labels
            else:
                out[name] = self.store.gather(self.positions, name)
        return out

    def blocks(self, *names: str, rows: int = DEFAULT_BLOCK_ROWS) -> Iterator[dict[str, Any]]:
        """Iterate over the selection in blocks of at most ``rows`` rows.

        Yields
        ------
        dict
            ``"positions"`` (m,) row positions in the store index, ``"labels"`` (m,) and one
            array (m, ...) per requested name. Only one block is in memory at a time.
        """
        if rows < 1:
            raise InputError(f"blocks(): rows must be >= 1, got {rows}")
        names = names or tuple(self.store.array_names)
        self.store._check_names(names)
        labels = self.labels
        # Shards the selection reads densely (a quarter of their rows or more) are read ahead a
        # block ahead, on a background thread: while one block is consumed, the next block's
        # shards are read. A block waits for its own shards' read-ahead, so the disk sees one
        # sequential stream, not that stream and the block's page faults competing. Sparse
        # selections read single pages and gain nothing from it.
        offsets = self.store._offsets
        # positions are increasing: the selection's rows in shard s are [cuts[s], cuts[s + 1])
        cuts = np.searchsorted(self.positions, offsets)
        counts = np.diff(cuts)
        spans = np.diff(offsets)
        dense = {int(s) for s in np.flatnonzero((counts > 0) & (4 * counts >= spans))}
        asked: dict[int, Future[None] | None] = {}

        def shards(a: int, b: int) -> range:  # the shards of rows [a, b) of the selection
            if a >= b:
                return range(0)
            first = int(np.searchsorted(cuts, a, side="right")) - 1
            return range(first, int(np.searchsorted(cuts, b - 1, side="right")))

        def prefetch(a: int, b: int) -> None:
            for s in shards(a, b):
                if s in dense and s not in asked:
                    asked[s] = self.store._prefetch(s, names)

        n = len(self)
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            pos = self.positions[start:stop]
            if dense:
                prefetch(start, stop)
                prefetch(stop, min(stop + rows, n))
                for s in shards(start, stop):
                    job = asked.get(s)
                    if job is not None:
                        job.result()  # never raises: the read-ahead is best effort
            block: dict[str, Any] = {"positions": pos, "labels": labels[start : start + rows]}
            for name in names:
                block[name] = self.store.gather(pos, name)
            yield block


#: the read-ahead's read size, and its scratch buffer (one per background thread)
_READ_AHEAD_CHUNK = 8 << 20


def _read_ahead(files: Sequence[Path]) -> None:
    """Read ``files`` into the page cache: one sequential stream of 8 MiB reads.

    Measured on a virtual disk, this beat ``posix_fadvise(WILLNEED)``, which queues the whole
    file at once and competes with the reader's own page faults (median cold pass over a 2 GB
    store 2.2 s against 2.8 s, plain ``np.load(mmap_mode="r")`` 1.9-2.3 s). Chunks already in
    the page cache (probed with ``RWF_NOWAIT``) are not copied again. Best effort: errors are
    ignored here and surface, if real, when the shard is mapped.
    """
    buf = bytearray(_READ_AHEAD_CHUNK)
    probe = bytearray(4096)
    nowait = getattr(os, "RWF_NOWAIT", None)
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            off = 0
            while True:
                if nowait is not None:
                    try:
                        cached = os.preadv(fd, [probe], off, nowait)
                    except OSError:  # EAGAIN: not cached (or the flag is unsupported here)
                        cached = -1
                    if cached == 0:
                        break
                    if cached > 0:
                        off += _READ_AHEAD_CHUNK
                        continue
                got = os.preadv(fd, [buf], off)
                if got <= 0:
                    break
                off += got
        except OSError:
            pass
        finally:
            os.close(fd)


#: one background thread reads ahead for every store (one sequential stream for the disk)
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semshift-prefetch")


# --------------------------------------------------------------------------- open / concat
def row_class_ids(
    meta: Mapping[str, Any], labels: NDArray[np.int64], index: pd.DataFrame
) -> list[str | None]:
    """Each row's class id: the store's ``class_id`` column, else the class list id of its
    label, else (rows outside the class list, e.g. open-set images in a class-folder tree) the
    name of the image's folder; None for a flat file outside the class list.

    >>> import pandas as pd, numpy as np
    >>> meta = {"classes": {"ids": ["n01", "n02"]}}
    >>> index = pd.DataFrame({"path": ["n02/a.png", "x7/b.png", "c.png"]})
    >>> row_class_ids(meta, np.array([1, -1, -1]), index)
    ['n02', 'x7', None]
    """
    import os

    if "class_id" in index.columns:
        return [None if pd.isna(v) else str(v) for v in index["class_id"].tolist()]
    classes = meta.get("classes") or {}
    ids = list(classes.get("ids") or []) if isinstance(classes, Mapping) else []
    folders = np.asarray(
        [os.path.basename(os.path.dirname(p)) or None for p in index["path"].astype(str)],
        dtype=object,
    )
    known = (labels >= 0) & (labels < len(ids))
    table = np.asarray([*map(str, ids), None], dtype=object)
    out = np.where(known, table[np.where(known, labels, len(ids))], folders)
    return list(out)


def open_store(path: str | Path, *, _index: pd.DataFrame | None = None) -> FeatureStore:
    """Open a finished store lazily (reads ``meta.json``; the index and arrays on demand).

    ``_index`` is internal: the writer hands over the index it has just written, so finishing a
    store does not read it back.

    Raises
    ------
    InputError
        ``path`` is not a store, is unfinished, or its files disagree with ``meta.json``.
    """
    root = Path(path)
    meta_file = root / "meta.json"
    meta = read_meta(root)
    if meta.get("format") != FORMAT_VERSION:
        raise InputError(
            f"{meta_file}: store format {meta.get('format')!r}, this semshift reads format "
            f"{FORMAT_VERSION}"
        )
    index_file = root / "index.parquet"
    if _index is None:  # the index itself is read on first use; its footer now
        import pyarrow.parquet as pq

        try:
            footer = pq.read_metadata(index_file)
            n_index, columns = footer.num_rows, footer.schema.to_arrow_schema().names
        except (OSError, ValueError) as err:
            raise InputError(f"{index_file}: unreadable ({err})") from None
    else:
        n_index, columns = len(_index), list(_index.columns)
    shards = [
        _Shard(root / "shards", int(s["shard"]), int(s["rows"]), s["files"]) for s in meta["shards"]
    ]
    if sum(s.rows for s in shards) != n_index:
        raise InputError(
            f"{root}: index.parquet has {n_index} rows but the shards hold "
            f"{sum(s.rows for s in shards)}; the store is damaged (semshift store repair)"
        )
    skipped = read_skipped(root / "skipped.csv")
    head_file = root / "head.npz" if meta.get("head") else None
    return FeatureStore(
        root, meta, _index, shards, skipped, head_file, index_file=index_file, columns=columns
    )


#: Columns of a store's ``skipped.csv``, in order.
SKIPPED_COLUMNS = ("sample_id", "path", "reason")


def read_skipped(path: str | Path) -> pd.DataFrame:
    """A store's ``skipped.csv``: ``sample_id`` (int64), ``path``, ``reason`` (str).

    A missing or zero-byte file (stores of early versions) is an empty table.

    Raises
    ------
    InputError
        One line naming the file: not UTF-8 text, not a CSV, other columns than
        :data:`SKIPPED_COLUMNS`, or a ``sample_id`` that is not an integer (its line is named).
    """
    f = Path(path)
    frame = _skipped_frame(f)
    if isinstance(frame, str):
        raise InputError(
            f"{f}: {frame}; the store is damaged (semshift store verify; semshift store repair)"
        )
    return frame


def _skipped_frame(f: Path) -> pd.DataFrame | str:
    """The table of :func:`read_skipped`, or what is wrong with it (without the file name)."""
    from semshift.textio import read_csv

    if not f.is_file() or f.stat().st_size == 0:
        return pd.DataFrame({"sample_id": np.zeros(0, np.int64), "path": [], "reason": []})
    what = f"skipped-images table {f}"
    try:
        frame = read_csv(f, "skipped-images table", dtype=str, keep_default_na=False)
    except InputError as err:  # its advice (save as UTF-8, ...) is not for a store's file
        text = str(err).split("; ")[0]
        return (
            text[len(what) :].lstrip(",: ").removeprefix("is ") if text.startswith(what) else text
        )
    if tuple(frame.columns) != SKIPPED_COLUMNS:
        got = ", ".join(map(str, frame.columns))
        return f"columns {got}, expected {', '.join(SKIPPED_COLUMNS)}"
    ids = frame["sample_id"].astype(str).str.strip()
    bad = ~ids.str.fullmatch(r"[-+]?[0-9]{1,18}").to_numpy(bool)
    if bad.any():
        r = int(np.argmax(bad))
        return f"line {r + 2}: sample_id {ids.iloc[r]!r} is not an integer"
    return frame.assign(sample_id=ids.to_numpy().astype(np.int64))


def concat_stores(stores: Iterable[FeatureStore | str | Path]) -> FeatureStore:
    """Concatenate stores of the same schema into one (a view: nothing is copied).

    The schema is: array names and shapes, model, layer, weights, preprocessing, class list and
    head. Group columns may differ: a column missing from one store is empty (NA) for its rows.
    A ``source`` column (the store directory) is added unless present.

    Raises
    ------
    InputError
        Fewer than one store, or schemas differ (the message names each differing field).
    """
    opened = [s if isinstance(s, FeatureStore) else open_store(s) for s in stores]
    if not opened:
        raise InputError("concat_stores() needs at least one store")
    ref = _schema(opened[0].meta)
    for k, st in enumerate(opened[1:], 1):
        other = _schema(st.meta)
        diff = [key for key in ref if ref[key] != other[key]]
        if diff:
            parts = "; ".join(f"{key}: {_short(ref[key])} vs {_short(other[key])}" for key in diff)
            raise InputError(
                f"cannot concatenate {opened[0]._where()} and {st._where()} (store {k}): "
                f"different schema ({parts})"
            )
    frames: list[pd.DataFrame] = []
    shards: list[_Shard] = []
    skipped: list[pd.DataFrame] = []
    for st in opened:
        frame = st.index.copy()
        frame["shard"] = (frame["shard"].astype(np.int64) + len(shards)).astype(np.int32)
        if "source" not in frame.columns:
            frame["source"] = str(st.path) if st.path is not None else "<concatenation>"
        frames.append(frame)
        shards.extend(st._shards)
        skipped.append(st.skipped)
    index = pd.concat(frames, ignore_index=True)
    groups = [c for c in index.columns if c not in RESERVED_COLUMNS]
    index = index[[*RESERVED_COLUMNS, *groups]]
    meta = dict(opened[0].meta)
    meta.update(
        n_rows=len(index),
        groups=groups,
        sources=[str(s.path) for s in opened],
        shards=[{"shard": i, "rows": s.rows, "files": dict(s.files)} for i, s in enumerate(shards)],
    )
    return FeatureStore(
        None,
        meta,
        index,
        shards,
        pd.concat(skipped, ignore_index=True),
        opened[0]._head_file,
    )


def _short(value: Any, n: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."
