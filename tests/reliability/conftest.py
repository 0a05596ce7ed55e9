"""Run the ``semshift`` command in this process (imports paid once), capturing its output.

The CLI's entry point :func:`semshift.cli.main` is called with the arguments, in the given
folder, with stdout and stderr captured at the file-descriptor level (so library warnings
printed before an error are seen too). An exception escaping ``main`` (a traceback in the
installed command) fails the test. The tests that need real processes (locks, kills) start
the installed command instead.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    def call(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        from semshift.cli import main

        before = Path.cwd()
        capfd.readouterr()
        code = 0
        try:
            if cwd is not None:
                os.chdir(cwd)
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(before)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return call


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image folder of two classes, three images each."""
    from tests.training.images import write_class_images

    return write_class_images(tmp_path_factory.mktemp("images") / "imgs", {"a": 3, "b": 3})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Weights of the tests' tiny CNN with a two-class head."""
    from tests.tiny_model import save_tiny_cnn_weights

    return save_tiny_cnn_weights(tmp_path_factory.mktemp("tiny") / "tiny.pt", 2)


def extract_args(images: Path, weights: Path, out: Path) -> list[str]:
    """``semshift extract`` of ``images`` with the tiny CNN into ``out``: shards of 2 rows."""
    from tests.tiny_model import TINY_CNN

    return [
        "extract", "--model", TINY_CNN, "--weights", weights, "--data", images, "--out", out,
        "--num-classes", "2", "--preset", "resize32-crop32", "--batch-size", "2",
        "--shard-size", "2", "--workers", "0", "--device", "cpu", "--no-progress",
    ]  # fmt: skip
