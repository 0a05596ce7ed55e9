"""Out-of-range option values, duplicate YAML keys, bad weights files, unfinished stores.

Each is one line starting with ``error:`` and exit 2 from the CLI (or the library's
``InputError``), reported before any model is built or any output written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semshift.errors import InputError


@pytest.fixture
def error(cli):
    """The single ``error:`` line of a command that must exit 2 (run in this process)."""

    def call(args: list[str], cwd: Path) -> str:
        res = cli(args, cwd=cwd)
        assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
        return lines[0]

    return call


def test_duplicate_yaml_keys_are_refused(tmp_path, error) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("name: x\nmodel:\n  name: a\n  batch_size: 4\n  name: b\n")
    msg = error(["run", str(cfg)], tmp_path)
    assert f"{cfg.name}, line 5, column 3: invalid YAML (key 'name' is given twice)" in msg


def test_superclass_threshold_outside_a_cosine_is_refused(tmp_path, error) -> None:
    msg = error(["splits", "superclass", "--out", "o", "--threshold", "2.0"], tmp_path)
    assert "threshold: a cosine similarity in [-1, 1], got 2.0" in msg
    assert not (tmp_path / "o").exists()


def test_zsl_with_an_empty_image_list_is_refused(tmp_path, error) -> None:
    (tmp_path / "classes.txt").write_text("n01440764\nn01443537\n")
    (tmp_path / "images.txt").write_text("")
    msg = error(["splits", "zsl", "--classes", "classes.txt", "--images", "images.txt",
                  "--out", "o"], tmp_path)  # fmt: skip
    assert "image list images.txt is empty" in msg
    assert not (tmp_path / "o").exists()


def test_ambiguity_max_fraction_outside_0_1_is_refused() -> None:
    from semshift.splits.cleaning import visual_ambiguity

    x = np.zeros((2, 3), np.float32)
    for bad in (7.0, -0.1):
        with pytest.raises(InputError, match=r"^max_fraction: a fraction .* in \[0, 1\]"):
            visual_ambiguity(x, x, ["a", "b"], threshold=0.1, max_fraction=bad)


def test_laid_needs_epochs_triplets_and_a_positive_rate() -> None:
    from semshift.splits.graded import fit_laid_from_text, train_laid

    e = np.ones((4, 2), np.float32)
    with pytest.raises(InputError, match="epochs must be >= 1, got 0"):
        train_laid(e, e, e, epochs=0)
    with pytest.raises(InputError, match="lr must be > 0"):
        train_laid(e, e, e, lr=0.0)

    class NeverCalled:
        def encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - must not run
            raise AssertionError("the triplets are checked before any text is encoded")

    with pytest.raises(InputError, match="number of triplets must be >= 1, got 0"):
        fit_laid_from_text(NeverCalled(), ["a"], n_triplets=0)


def test_weights_files_that_are_no_checkpoint(tmp_path, error) -> None:
    """A text file was reported as a pickle (a KeyError traceback from torch.load), and a
    missing file printed open_clip's warning before the error."""
    (tmp_path / "w.txt").write_text("hello\n")
    (tmp_path / "imgs" / "a").mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "imgs" / "a" / "x.png")
    msg = error(["extract", "--model", "resnet18", "--weights", "w.txt", "--data", "imgs",
                  "--out", "o", "--num-classes", "2", "--no-progress"], tmp_path)  # fmt: skip
    assert "weights file w.txt: neither a PyTorch checkpoint nor a .safetensors file" in msg
    msg = error(["splits", "laid", "--model", "open_clip/ViT-B-32", "--weights", "none.pt",
                  "--out", "o"], tmp_path)  # fmt: skip
    assert "weights file none.pt does not exist" in msg
    assert not (tmp_path / "o").exists()


def test_an_unfinished_store_says_so_everywhere(tmp_path) -> None:
    from semshift.features.store import open_store, read_meta
    from semshift.run.cache import store_fingerprint

    unfinished = tmp_path / "s"
    unfinished.mkdir()
    (unfinished / "run.json").write_text("{}")
    for call in (open_store, read_meta, store_fingerprint):
        with pytest.raises(InputError, match=r"is an unfinished extraction .* run the extraction"):
            call(unfinished)
    with pytest.raises(InputError, match=r"feature store .* does not exist"):
        read_meta(tmp_path / "nothing")
