"""One reader for every text file a user gives semshift: UTF-8 or a one-line error.

Every text input (run configs, class lists, file lists, custom taxonomies, image tables,
split manifests, super-class names, score tables) is read by :func:`read_text`, every CSV by
:func:`read_csv` and every JSON file by :func:`read_json`, so each failure reads the same way,
names the file and what it was for, and is an :class:`~semshift.errors.InputError` (exit 2 from
the CLI):

- ``cannot read <what> <path>: No such file or directory`` (or the system's reason);
- ``<what> <path> is not UTF-8 text (byte 0xff at offset 3)``;
- ``<what> <path> is empty`` (CSV without even a header);
- ``<what> <path>, line 4: <the parser's reason>`` (a malformed CSV row).

A UTF-8 byte-order mark is accepted and dropped (spreadsheet exports write one). YAML files
(run and training configs) are read by :func:`read_yaml`: a key given twice is refused and a
syntax error names its line and column.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semshift.errors import InputError, SemshiftError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_csv", "read_json", "read_text", "read_yaml", "unique_key_loader"]


def read_text(
    path: str | Path,
    what: str,
    *,
    error: type[SemshiftError] = InputError,
    hint: str = "save it as UTF-8",
) -> str:
    """The contents of a UTF-8 text file (a leading byte-order mark dropped).

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        What the file is for, as the message names it (``"class list"``, ``"config file"``).
    error : type
        The error class raised (a user-facing error class, e.g. the taxonomy's).
    hint : str
        What to do about text that is not UTF-8 (``""`` for none: a file semshift wrote).

    Raises
    ------
    InputError
        The file cannot be read or is not UTF-8 text.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a file") from None
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = data[err.start : err.start + 1]
        raise error(
            f"{what} {path} is not UTF-8 text (byte 0x{bad.hex()} at offset {err.start})"
            + (f"; {hint}" if hint else "")
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_csv(
    path: str | Path, what: str, *, text: str | None = None, **kwargs: Any
) -> pd.DataFrame:
    """A CSV table read with pandas from :func:`read_text`'s checked text.

    ``kwargs`` go to :func:`pandas.read_csv` (``dtype=str, keep_default_na=False`` are the
    usual choice for tables of names). ``text`` skips reading the file again when the caller
    already has its contents.

    Raises
    ------
    InputError
        Unreadable, not UTF-8, empty (not even a header), or malformed (the line is named).
    """
    import pandas as pd

    body = read_text(path, what) if text is None else text
    if not body.strip():
        raise InputError(f"{what} {path} is empty (a CSV needs at least a header line)")
    try:
        return pd.read_csv(io.StringIO(body), **kwargs)
    except pd.errors.EmptyDataError:
        raise InputError(f"{what} {path} is empty (a CSV needs at least a header line)") from None
    except (pd.errors.ParserError, ValueError) as err:
        msg = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        line = re.search(r"line (\d+)", msg)
        where = f", line {line.group(1)}" if line else ""
        raise InputError(f"{what} {path}{where}: not a valid CSV table ({msg})") from None


def read_json(
    path: str | Path,
    what: str,
    *,
    error: type[SemshiftError] = InputError,
    hint: str = "save it as UTF-8",
) -> Any:
    """The data of a UTF-8 JSON file (a leading byte-order mark dropped).

    Errors are one line naming the file: those of :func:`read_text` (``error`` and ``hint`` as
    there), or invalid JSON with its line and column (``<what> <path>: not valid JSON (line 3,
    column 9: Expecting ',' ...)``).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "z.json")
    ...     _ = open(p, "w", encoding="utf-8").write('{"split": "s",\\n "store": }')
    ...     try:
    ...         read_json(p, "zero-shot spec")
    ...     except InputError as err:
    ...         print(str(err).replace(p, "z.json"))
    zero-shot spec z.json: not valid JSON (line 2, column 11: Expecting value)
    """
    import json

    text = read_text(path, what, error=error, hint=hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(
            f"{what} {path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None


#: Floats YAML 1.2 reads and PyYAML's YAML 1.1 rules leave as text: ``1e-3``, ``2E5`` (an
#: exponent without a decimal point or without a sign).
_EXPONENT_FLOAT = r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"


def unique_key_loader() -> Any:
    """A ``yaml.SafeLoader`` that refuses a key given twice in one mapping (plain YAML keeps
    the last value silently, so a repeated ``detectors:`` would drop the first list) and reads
    ``1e-3`` as a number, as YAML 1.2 does (PyYAML's YAML 1.1 rules read it as text)."""
    import re

    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, list | dict):
                    continue  # unhashable: the base class reports it
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    # on the subclass only: PyYAML copies the resolver table before adding to it
    UniqueKeyLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float", re.compile(_EXPONENT_FLOAT), list("-+0123456789.")
    )
    return UniqueKeyLoader


def read_yaml(path: str | Path, what: str) -> Any:
    """The data of a UTF-8 YAML file, read safely (no Python objects are ever built).

    Errors are one line (:class:`~semshift.errors.InputError`): those of :func:`read_text`, a
    key given twice, or invalid YAML with its line and column
    (``<path>, line 3, column 1: invalid YAML (key 'name' is given twice)``).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "c.yaml")
    ...     _ = open(p, "w", encoding="utf-8").write("a: 1\\nb: [x, y]\\nlr: 1e-3\\n")
    ...     read_yaml(p, "config file")
    {'a': 1, 'b': ['x', 'y'], 'lr': 0.001}
    """
    import yaml

    text = read_text(path, what)
    try:
        return yaml.load(text, Loader=unique_key_loader())  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{path}{where}: invalid YAML ({problem})") from None
