"""The light commands start without the heavy libraries: each runs in a fresh interpreter and
the modules it imported are compared with what it needs (a deterministic import set, not a
wall clock; ``benchmarks/bench_cli_start.py`` times them).

Light: every ``--help``, ``--version``, ``taxonomy show`` / ``distance``, ``splits show``,
``benchmark list`` (these import no pandas either), and ``splits compare``, ``splits check``
and ``store verify`` on a small store (their tables are pandas frames).
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
    # none of them builds a frame: pandas (0.5 s) stays out too
    assert [d["args"] for d in done if "pandas" in d["new"]] == []
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


def test_compare_check_and_store_verify_import_pandas_but_no_heavy_module(tmp_path):
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
    texts = [str(d["text"]) for d in done]
    assert "jaccard" in texts[0] and "1.000" in texts[0]
    assert "no leaks found" in texts[1]
    assert "intact (2 shards, 6 rows" in texts[2]
    assert "semshift.splits.ssb" in done[3]["new"]
    for builder in ("cleaning", "graded", "sample", "ssb", "superclass", "zsl"):
        assert f"\n│ {builder} " in texts[3], builder
    assert "semshift.catalog.benchmarks" in done[4]["new"]
    assert "│ ssb_split " in texts[4] and "│ imagenet1k " in texts[4]


@pytest.mark.parametrize("package", ["semshift.catalog", "semshift.features", "semshift.splits"])
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
