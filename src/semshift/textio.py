"""One reader for every text file a user gives semshift: UTF-8 or a one-line error.

Every text input (run configs, class lists, file lists, custom taxonomies, image tables,
split manifests, super-class names, score tables) is read by :func:`read_text`, and every
CSV by :func:`read_csv`, so each failure reads the same way, names the file and what it was
for, and is an :class:`~semshift.errors.InputError` (exit 2 from the CLI):

- ``cannot read <what> <path>: No such file or directory`` (or the system's reason);
- ``<what> <path> is not UTF-8 text (byte 0xff at offset 3)``;
- ``<what> <path> is empty`` (CSV without even a header);
- ``<what> <path>, line 4: <the parser's reason>`` (a malformed CSV row).

A UTF-8 byte-order mark is accepted and dropped (spreadsheet exports write one).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semshift.errors import InputError, SemshiftError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_csv", "read_text"]


def read_text(path: str | Path, what: str, *, error: type[SemshiftError] = InputError) -> str:
    """The contents of a UTF-8 text file (a leading byte-order mark dropped).

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        What the file is for, as the message names it (``"class list"``, ``"config file"``).
    error : type
        The error class raised (a user-facing error class, e.g. the taxonomy's).

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
            f"{what} {path} is not UTF-8 text (byte 0x{bad.hex()} at offset {err.start}); "
            "save it as UTF-8"
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
