"""Every text file a CLI command reads: missing, not UTF-8, empty -> one line, exit 2.

Each case runs the ``semshift`` command (in this process, see conftest.py) on a file that is
bad in one way and checks that stderr is exactly one line starting with ``error:`` that names
the file and the problem, that the exit code is 2, that no exception escapes and that no
output folder is created.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

NOT_UTF8 = b"id,parent\nroot,\n\xff\xfeabc,root\n"


def _manifest(tmp: Path) -> Path:
    """A valid split manifest written by the library (no CLI call)."""
    from semshift.splits.manifest import SplitManifest

    folder = tmp / "split"
    folder.mkdir()
    SplitManifest(
        method="test", params={}, taxonomy="custom", known=["a"], bins={"easy": ["b"]}
    ).write(folder)
    return folder


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


# (case id, builder: tmp -> (args, file the message must name), needle)
Case = tuple[str, Callable[[Path], tuple[list[str], Path]], str]


def _cases() -> list[Case]:
    def config(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        f = _write(tmp / "run.yaml", body)
        return ["run", str(f)], f

    def taxonomy(tmp: Path, body: bytes, suffix: str) -> tuple[list[str], Path]:
        f = _write(tmp / f"tax{suffix}", body)
        return ["taxonomy", "show", "root", "--taxonomy", str(f)], f

    def zsl_images(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        cl = _write(tmp / "classes.txt", b"n01440764\nn01443537\n")
        f = _write(tmp / "images.txt", body)
        out = tmp / "o"
        return ["splits", "zsl", "--classes", str(cl), "--images", str(f), "--out", str(out)], f

    def zsl_classes(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        cl = _write(tmp / "classes.txt", body)
        f = _write(tmp / "images.txt", b"a.jpg 0\n")
        return ["splits", "zsl", "--classes", str(cl), "--images", str(f), "--out",
                str(tmp / "o")], cl  # fmt: skip

    def show(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        (tmp / "s").mkdir()
        f = _write(tmp / "s" / "split.json", body)
        return ["splits", "show", str(tmp / "s")], f

    def superclass(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        f = _write(tmp / "names.txt", body)
        return ["splits", "superclass", "--names", str(f), "--out", str(tmp / "o")], f

    def check(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        folder = _manifest(tmp)
        f = _write(tmp / "images.csv", body)
        return ["splits", "check", str(folder), "--images", str(f), "--no-hash"], f

    def file_list(tmp: Path, body: bytes) -> tuple[list[str], Path]:
        f = _write(tmp / "list.txt", body)
        return ["extract", "--model", "resnet18", "--random-init", "--data", str(f), "--out",
                str(tmp / "o"), "--no-progress"], f  # fmt: skip

    bad = b"\xff\xfe\x00garbage\n"
    return [
        ("run config", lambda t: config(t, bad), "config file"),
        ("taxonomy csv", lambda t: taxonomy(t, NOT_UTF8, ".csv"), "taxonomy"),
        ("taxonomy json", lambda t: taxonomy(t, b'{"\xff": 1}', ".json"), "taxonomy"),
        ("zsl image list", lambda t: zsl_images(t, bad), "image list"),
        ("zsl class list", lambda t: zsl_classes(t, bad), "class list"),
        ("split manifest", lambda t: show(t, b'{"method": "\xff"}'), "split manifest"),
        ("super-class names", lambda t: superclass(t, bad), "super-class names"),
        ("check image table", lambda t: check(t, b"path,set\n\xff.jpg,train\n"), "image table"),
        ("extract file list", lambda t: file_list(t, bad), "file list"),
    ]


CASES = _cases()


def _one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: "), lines[0]
    return " ".join(res.stderr.split())  # the console may wrap a long line


@pytest.mark.parametrize(("case", "build", "what"), CASES, ids=[c[0] for c in CASES])
def test_not_utf8_is_one_line_naming_the_file(tmp_path, cli, case, build, what) -> None:
    args, bad_file = build(tmp_path)
    msg = _one_line_error(cli(args, tmp_path))
    assert f"{what} {bad_file} is not UTF-8 text" in msg, msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("case", "build", "what"), CASES, ids=[c[0] for c in CASES])
def test_missing_file_is_one_line(tmp_path, cli, case, build, what) -> None:
    args, bad_file = build(tmp_path)
    bad_file.unlink()
    msg = _one_line_error(cli(args, tmp_path))
    assert str(bad_file) in msg, msg
    assert not (tmp_path / "o").exists()


def test_an_empty_image_table_is_one_line(tmp_path, cli) -> None:
    """It raised pandas' EmptyDataError before."""
    folder = _manifest(tmp_path)
    empty = _write(tmp_path / "empty.csv", b"")
    msg = _one_line_error(cli(["splits", "check", str(folder), "--images", str(empty)], tmp_path))
    assert f"image table {empty} is empty" in msg


def test_a_byte_order_mark_is_accepted(tmp_path, cli) -> None:
    """Spreadsheet exports start with a UTF-8 byte-order mark: read as plain UTF-8."""
    tax = _write(tmp_path / "tax.csv", "\ufeffid,parent\nroot,\nleaf,root\n".encode())
    res = cli(["taxonomy", "show", "leaf", "--taxonomy", str(tax)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "root" in res.stdout


def test_the_reader_itself(tmp_path) -> None:
    from semshift.errors import InputError, TaxonomyFormatError
    from semshift.textio import read_text

    with pytest.raises(InputError, match=r"^cannot read thing /nonexistent/x: No such file"):
        read_text("/nonexistent/x", "thing")
    with pytest.raises(TaxonomyFormatError, match="is a directory"):
        read_text("/", "taxonomy", error=TaxonomyFormatError)
    assert read_text(_write(tmp_path / "bom.txt", b"\xef\xbb\xbfhi\n"), "t") == "hi\n"


def test_a_malformed_csv_names_the_line(tmp_path) -> None:
    from semshift.errors import InputError
    from semshift.textio import read_csv

    f = _write(tmp_path / "t.csv", b"a,b\n1,2\n3,4,5,6\n")
    with pytest.raises(InputError, match=r"t\.csv, line 3: not a valid CSV table"):
        read_csv(f, "table")
    frame = read_csv(_write(tmp_path / "u.csv", b"a,b\n1,2\n"), "table")
    assert frame.to_dict("list") == {"a": [1], "b": [2]}
