"""The light commands start without the heavy libraries: each runs in a fresh interpreter and
the modules it imported are compared with what it needs (a deterministic import set, not a
wall clock; ``benchmarks/bench_cli_start.py`` times them).

Light: every ``--help``, ``--version``, ``taxonomy show`` / ``distance``, ``splits show``,
``benchmark list``, ``splits compare``, ``splits check`` and ``store verify`` on a small store
(these import no pandas either).
None of them imports pydantic (typer's checks of ``str``, ``bool`` and ``Path`` values,
:func:`semshift.cli._app._plain_strings`), and those that name a shipped command group scan
no installed package's entry points.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: what no light command imports: deep learning, SciPy, scikit-learn, plotting, the detectors
#: (0.5 s), the model and extraction code, Ray
HEAVY = (
    "torch", "torchvision", "timm", "open_clip", "safetensors", "scipy", "sklearn", "matplotlib",
    "ray", "faiss", "PIL", "semshift.detectors", "semshift.features.extract",
    "semshift.features.models", "semshift.metrics", "semshift.protocols", "semshift.training",
    "semshift.run", "semshift.report",
)  # fmt: skip

#: runs each command (a list of argv lists) in this interpreter and writes, per command, the
#: exit status, the start of its output, and the heavy, data and semshift modules it imported
#: first
_CHILD = textwrap.dedent(
    """
    import contextlib, io, json, sys
    import typer
    from typer.exceptions import Exit
    from semshift.cli import app, main

    commands, out = json.loads(sys.argv[1]), sys.argv[2]
    heavy = tuple(json.loads(sys.argv[3]))
    command = None
    done, seen = [], set(sys.modules)
    for args in commands:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                if args[-1] == "--help":  # one built command for every help page
                    command = command or typer.main.get_command(app)
                    command.main(args=args, prog_name="semshift", standalone_mode=False)
                    code = 0
                else:
                    main(args)
                    code = 0
            except SystemExit as exc:
                code = exc.code
            except Exit as exc:
                code = exc.exit_code
        new = sorted(m for m in set(sys.modules) - seen if m.startswith(heavy)
                     or m in ("pandas", "numpy", "pyarrow") or m.startswith("semshift."))
        seen = set(sys.modules)
        done.append({"args": args, "code": code, "new": new, "text": sink.getvalue()[:8000]})
    with open(out, "w") as fh:
        json.dump(done, fh)
    """
)


def _run(commands: list[list[str]], tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "imports.json"
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(commands), str(out), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    done: list[dict[str, Any]] = json.loads(out.read_text())
    return done


def _help_pages() -> list[list[str]]:
    """``--help`` of the command, of every group and of every command."""
    import typer

    from semshift.cli import app

    root = typer.main.get_command(app)
    pages = [["--help"]]
    for name, cmd in root.commands.items():
        pages.append([name, "--help"])
        pages += [[name, sub, "--help"] for sub in getattr(cmd, "commands", {})]
    return pages


def _heavy(done: list[dict[str, Any]]) -> list[str]:
    """``command: module`` for each heavy module a command imported."""
    return [f"{' '.join(d['args'])}: {m}" for d in done for m in d["new"] if m.startswith(HEAVY)]


def test_help_taxonomy_splits_show_and_benchmark_list_import_no_heavy_module(tmp_path):
    from semshift.catalog import resolve_manifest

    resolve_manifest("published:ssb-cub").write(tmp_path / "cub")
    pages = _help_pages()
    assert len(pages) > 20 and ["taxonomy", "show", "--help"] in pages
    commands = [
        ["--version"],
        *pages,
        ["taxonomy", "show", "dog.n.01"],
        ["taxonomy", "distance", "dog.n.01", "cat.n.01"],
        ["splits", "show", str(tmp_path / "cub")],
        ["benchmark", "list"],
    ]
    done = _run(commands, tmp_path)
    assert [d["code"] for d in done] == [0] * len(commands), [
        (d["args"], d["text"]) for d in done if d["code"]
    ]
    assert _heavy(done) == []
    # none of them builds a frame: pandas (0.5 s) stays out too, and pydantic (typer's value
    # checks) and pyarrow (the WordNet's Parquet source)
    for module in ("pandas", "pydantic", "pyarrow"):
        assert [d["args"] for d in done if module in d["new"]] == [], module
    # the help pages need neither NumPy nor a WordNet: only the commands that read data do
    first = {m: d["args"] for d in reversed(done) for m in d["new"]}
    assert first["numpy"] == ["taxonomy", "show", "dog.n.01"]
    # a manifest is read without the split builders (pydantic, the taxonomy)
    assert first["semshift.splits.manifest"][:2] == ["splits", "show"]
    assert "semshift.splits.ssb" not in first and "semshift.splits.registry" not in first
    by_args = {" ".join(d["args"]): d["text"] for d in done}
    assert "n02084071" in by_args["taxonomy show dog.n.01"]
    assert "path 4" in by_args["taxonomy distance dog.n.01 cat.n.01"]
    assert "ssb-cub" in by_args["benchmark list"] and "isood-imagenet" in by_args["benchmark list"]


def test_compare_check_and_store_verify_import_no_heavy_module(tmp_path):
    import pandas as pd

    from semshift.catalog import resolve_manifest
    from semshift.features.store import write_store
    from semshift.splits.manifest import SplitManifest

    resolve_manifest("published:ssb-cub").write(tmp_path / "cub")
    split = SplitManifest("toy", {}, "custom", ["a", "b"], {"far": ["c"]})
    split.write(tmp_path / "toy")
    images = pd.DataFrame(
        {"path": ["a/1.png", "b/2.png", "c/3.png"], "set": ["known", "known", "far"],
         "class": ["a", "b", "c"]}
    )  # fmt: skip
    images.to_csv(tmp_path / "images.csv", index=False)
    index = pd.DataFrame({"path": [f"im{i}.png" for i in range(6)], "label": [0, 1, 2] * 2})
    logits = np.arange(18, dtype=np.float32).reshape(6, 3)
    write_store(tmp_path / "store", index=index, arrays={"logits": logits}, shard_size=4)
    commands = [
        ["splits", "compare", str(tmp_path / "cub"), "published:ssb-cub"],
        ["splits", "check", str(tmp_path / "toy"), "--images", "images.csv", "--no-hash"],
        ["store", "verify", str(tmp_path / "store")],
        # the registries import their modules on the first lookup: every builder, and the
        # benchmarks' layouts, though nothing imported them before
        ["list", "split-builders"],
        ["list", "layouts"],
    ]
    done = _run(commands, tmp_path)
    assert [d["code"] for d in done] == [0] * 5, [(d["args"], d["text"]) for d in done]
    assert _heavy(done) == []
    # compare and check build no frame (their rows are tuples); store verify reads meta.json,
    # hashes the files and recognises an empty skipped.csv without one
    assert [d["args"][:2] for d in done[:3] if "pandas" in d["new"]] == []
    texts = [str(d["text"]) for d in done]
    assert "jaccard" in texts[0] and "1.000" in texts[0]
    assert "no leaks found" in texts[1]
    assert "intact (2 shards, 6 rows" in texts[2]
    assert "semshift.splits.ssb" in done[3]["new"]
    for builder in ("cleaning", "graded", "sample", "ssb", "superclass", "zsl"):
        assert f"\n│ {builder} " in texts[3], builder
    assert "semshift.catalog.benchmarks" in done[4]["new"]
    assert "│ ssb_split " in texts[4] and "│ imagenet1k " in texts[4]


@pytest.mark.parametrize(
    "package",
    [
        "semshift.catalog",
        "semshift.catalog.benchmarks",
        "semshift.features",
        "semshift.features.store",
        "semshift.splits",
    ],
)
def test_lazy_packages_give_every_public_name(package):
    import importlib

    mod = importlib.import_module(package)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, name
        assert name in dir(mod)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        mod.nope  # noqa: B018


def test_lazy_names_are_the_defining_modules_objects():
    from semshift.catalog import get_benchmark, resolve_manifest
    from semshift.catalog.benchmarks import get_benchmark as bench
    from semshift.catalog.lists import resolve_manifest as resolve
    from semshift.features import open_store
    from semshift.features.store import open_store as opener
    from semshift.splits import SplitManifest, ssb_bin_level
    from semshift.splits.levels import ssb_bin_level as level
    from semshift.splits.manifest import SplitManifest as manifest
    from semshift.splits.ssb import ssb_bin_level as ssb_level

    assert (get_benchmark, resolve_manifest, open_store) == (bench, resolve, opener)
    assert SplitManifest is manifest and ssb_bin_level is level is ssb_level
    assert [level(b) for b in ("hard", "medium", "easy")] == [1, 2, 3]


def test_written_out_detector_names_equal_the_registry():
    """The detector names ``--help`` lists without importing the detectors
    (:mod:`semshift.cli._choices`): a new detector fails here until it is added there."""
    from semshift import detectors
    from semshift.cli import _choices

    assert list(_choices.POST_HOC_DETECTORS) == detectors.list_detectors(level="post_hoc")
    assert list(_choices.MODEL_DETECTORS) == detectors.list_detectors(level="model")
    assert _choices.detectors() == ", ".join(detectors.list_detectors())
    assert _choices.detectors("model") == ", ".join(detectors.list_detectors(level="model"))
    with pytest.raises(ValueError, match="takes None or 'model'"):
        _choices.detectors("post_hoc")


def test_taxonomy_looks_up_one_id_without_pandas():
    """One key is found in a dict; many keys through the pandas index, with the same rows."""
    from semshift.taxonomy import Taxonomy

    tax = Taxonomy(["root", "a", "b"], [1, 2], [0, 0])
    assert tax.index(np.str_("b")) == 2 and tax.index("a") == 1
    assert "b" in tax and ["b"] not in tax and "z" not in tax
    assert tax.indices(["b", "root", "a"]).tolist() == [2, 0, 1]


def test_the_command_builds_only_the_command_its_arguments_name():
    """typer builds every mounted command's options; ``semshift taxonomy show`` builds one."""
    import typer

    from semshift.cli import app

    every = typer.main.get_command(app)
    groups = set(every.commands)
    assert {"taxonomy", "splits", "evaluate"} <= groups

    def tree(args: list[str]) -> dict[str, list[str]]:
        cmd = app.command_for(args)
        return {n: sorted(getattr(c, "commands", {})) for n, c in cmd.commands.items()}

    assert tree(["taxonomy", "show", "dog.n.01"]) == {"taxonomy": ["show"]}
    assert tree(["splits", "show", "--help"]) == {"splits": ["show"]}
    assert tree(["evaluate", "--train", "x"]) == {"evaluate": []}
    assert tree(["splits"])["splits"] == sorted(every.commands["splits"].commands)
    assert tree(["splits", "shw"])["splits"] == sorted(every.commands["splits"].commands)
    for args in (["--help"], ["--version", "--help"], ["nosuch", "x"], []):
        assert set(tree(args)) == groups, args
    assert tree(["--version"]) == {}
    # nothing is left filtered
    assert set(typer.main.get_command(app).commands) == groups
    assert len(typer.main.get_command(app).commands["splits"].commands) > 1


def _leak_fixture(tmp_path: Path) -> tuple[Any, list[str]]:
    """A manifest and image tables (CSV texts) with every kind of image leak."""
    from semshift.splits.manifest import SplitManifest

    img = tmp_path / "img"
    for folder in ("a", "b", "c", "d"):
        (img / folder).mkdir(parents=True)
    (img / "a" / "1.png").write_bytes(b"same bytes")
    (img / "b" / "copy.png").write_bytes(b"same bytes")  # a copy under another path
    (img / "c" / "other.png").write_bytes(b"diff bytes")  # same size, other bytes
    (img / "d" / "4.png").write_bytes(b"x")
    (img / "a" / "5.png").write_bytes(b"same bytes")
    man = SplitManifest(
        "toy", {}, "custom", ["k1", "k2"], {"easy": ["e1", "k2"], "hard": ["h1"]},
        extra={"image_subsets": [["known", "val"]], "image_classes": {"val": "known"}},
    )  # fmt: skip
    rows = [
        ("a/1.png", "known", "k1"), ("b/copy.png", "easy", "e1"), ("c/other.png", "hard", "h1"),
        ("a/1.png", "easy", "e1"), ("a/1.png", "val", "k1"), ("d/4.png", "known", "zz"),
        ("missing.png", "hard", "h1"), ("a/5.png", "hard", "nope"), ("a/5.png", "hard", "h1"),
        (str(img / "d" / "4.png"), "easy", "e1"), ("d/../d/4.png", "other", "q"),
    ]  # fmt: skip
    with_class = "path,set,class\n" + "".join(f"{p},{s},{c}\n" for p, s, c in rows)
    without = "set,path\r\n" + "".join(f"{s},{p}\r\n" for p, s, _ in rows)
    return man, [with_class, without, "path,set,class\n", "path,set\na/1.png,known"]


def test_split_check_without_pandas_gives_the_frames_rows(tmp_path):
    """``semshift splits check`` reads a plain CSV table with the ``csv`` module: the same
    rows, in the same order, and the same counts as from the table pandas reads."""
    from semshift.splits.check import _plain_table, check_split, check_split_rows

    man, tables = _leak_fixture(tmp_path)
    kinds = set()
    for k, text in enumerate(tables):
        path = tmp_path / f"images{k}.csv"
        path.write_text(text, newline="")
        assert _plain_table(text) is not None
        for hash_content in (True, False):
            plain = check_split_rows(man, path, root=tmp_path / "img", hash_content=hash_content)
            frame = check_split_rows(
                man, path, root=tmp_path / "img", hash_content=hash_content, plain=False
            )
            assert plain == frame, (k, hash_content)
            kinds |= {r[0] for r in plain[0]}
            report = check_split(man, path, root=tmp_path / "img", hash_content=hash_content)
            assert report.violations.values.tolist() == [list(r) for r in plain[0]]
            assert report.checked == plain[1]
    assert kinds == {
        "class_overlap", "image_path_overlap", "image_content_overlap", "image_class_mismatch",
        "unreadable_image",
    }  # fmt: skip
    # what the csv module could read otherwise than pandas goes to pandas
    for text in ('path,set\n"a,1.png",known\n', "path,set\n\na,known\n", "path,set\na,b,c\n",
                 "path,path\na,b\n", "path,\na,b\n", "path,set\ra,b\r", "   \n", ""):  # fmt: skip
        assert _plain_table(text) is None, text
    path = tmp_path / "quoted.csv"
    path.write_text('path,set,class\n"a/1.png",known,k1\n"b/copy.png",easy,e1\n')
    assert check_split_rows(man, path, root=tmp_path / "img") == check_split_rows(
        man, path, root=tmp_path / "img", plain=False
    )


def test_split_compare_rows_are_the_frames():
    from semshift.catalog import resolve_manifest
    from semshift.splits.manifest import SplitManifest, compare_manifests, overlap_rows

    pairs = [
        (resolve_manifest("published:ssb-cub"), resolve_manifest("published:ssb-scars")),
        (SplitManifest("x", {}, "none", [], {"a": [], "b": ["1"]}),
         SplitManifest("y", {}, "none", ["1"], {"c": ["2"], "a": []})),
    ]  # fmt: skip
    for a, b in pairs:
        rows = overlap_rows(a, b)
        frame = compare_manifests(a, b)
        assert list(frame.columns) == ["bin", "n_a", "n_b", "n_common", "jaccard"]
        got = [tuple(r) for r in frame.itertuples(index=False)]
        assert [r[:4] for r in got] == [r[:4] for r in rows]
        assert np.array_equal([r[4] for r in got], [r[4] for r in rows], equal_nan=True)
    assert [r[0] for r in overlap_rows(*pairs[1])] == ["known", "a", "b", "c"]
    assert np.isnan(overlap_rows(*pairs[1])[1][4])


def test_a_shipped_command_reads_no_package_metadata(tmp_path):
    """A command of a shipped group neither imports importlib.metadata (40 ms) nor scans the
    installed packages' entry points: plugins can only add other groups."""
    from semshift.catalog import resolve_manifest

    resolve_manifest("published:ssb-cub").write(tmp_path / "cub")
    for args in (["taxonomy", "show", "dog.n.01"], ["splits", "show", str(tmp_path / "cub")]):
        (done,) = _run([args], tmp_path)
        assert done["code"] == 0, done["text"]
        assert "importlib.metadata" not in done["new"], args
        assert not [m for m in done["new"] if m.startswith("pydantic")], args


def test_plain_parameter_checks_give_typers_values(tmp_path):
    """``str``, ``bool`` and ``Path`` values pass without pydantic, equal to what typer's own
    checks give; other types (an int option) keep typer's check and its error."""
    import typer

    from semshift.cli import app
    from semshift.cli._app import _AsGiven

    args = ["splits", "check", str(tmp_path), "--images", "im.csv", "--no-hash"]
    ours = app.command_for(args).commands["splits"].commands["check"]
    theirs = typer.main.get_command(app).commands["splits"].commands["check"]
    assert all(isinstance(p._runtime_param, _AsGiven) for p in ours.params)
    assert all(p._runtime_param is None for p in theirs.params)
    for cmd in (ours, theirs):
        ctx = cmd.make_context("check", args[2:])
        assert ctx.params == {
            "manifest": tmp_path, "images": Path("im.csv"), "root": None, "no_hash": True,
            "report": None,
        }  # fmt: skip
        assert type(ctx.params["images"]) is type(Path("im.csv"))
    sample = app.command_for(["splits", "sample"]).commands["splits"].commands["sample"]
    seed = next(p for p in sample.params if p.name == "seed")
    assert not isinstance(seed._runtime_param, _AsGiven)  # an int: typer's check
    with pytest.raises(typer.BadParameter, match="valid integer"):
        sample.make_context("sample", ["--out", "x", "--seed", "many"])
    assert sample.make_context("sample", ["--out", "x", "--seed", "7"]).params["seed"] == 7


def test_store_verify_counts_skipped_rows_as_the_frame_does(tmp_path):
    """An empty ``skipped.csv`` is recognised without pandas; any other is parsed and checked as
    :func:`read_skipped` does (row count against ``meta.json``, integer sample ids)."""
    import pandas as pd

    from semshift.features.store import read_skipped, verify_store, write_store
    from semshift.features.store.verify import _skipped_rows

    index = pd.DataFrame({"path": [f"im{i}.png" for i in range(4)], "label": [0, 1] * 2})
    logits = np.arange(8, dtype=np.float32).reshape(4, 2)
    write_store(tmp_path / "s", index=index, arrays={"logits": logits}, shard_size=4)
    f = tmp_path / "s" / "skipped.csv"
    assert _skipped_rows(f) == 0 == len(read_skipped(f)) and verify_store(tmp_path / "s") == []
    for text, rows in [
        ("", 0),
        ("sample_id,path,reason\r\n", 0),
        ("sample_id,path,reason\n3,a.png,unreadable\n", 1),
        ('sample_id,path,reason\n3,"a,b.png",x\n4,c.png,y\n', 2),
    ]:
        f.write_text(text, newline="")
        assert _skipped_rows(f) == rows == len(read_skipped(f)), text
    f.write_text("sample_id,path,reason\nx,a.png,unreadable\n")
    assert _skipped_rows(f) == "line 2: sample_id 'x' is not an integer"
    (tmp_path / "gone.csv").unlink(missing_ok=True)
    assert _skipped_rows(tmp_path / "gone.csv") == 0
