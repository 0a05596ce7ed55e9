"""The bad-input matrix: CLI command x class of malformed input -> one line, exit 2.

Classes: wrong type, out of range, NaN, missing, wrong format (a file where a folder is
expected, a malformed NAME=STORE), mismatched (a store of other classes), unknown names. Each
case runs the ``semshift`` command (in this process, see conftest.py; ``--quiet`` where the
command has it) and checks the exit code 2, a single stderr line starting with ``error:`` that
contains the expected words, and that no results were written. Text files (missing, not
UTF-8, empty) are in ``test_text_inputs.py``, damaged stores in ``test_store_damage.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.run.conftest import build_stores, make_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("matrix")
    out = build_stores(root)
    rng = np.random.default_rng(0)
    means = np.abs(rng.normal(0, 3, (6, 12))).astype(np.float32)
    out["six"] = make_store(root / "six", rng, means, (means, np.zeros(6, np.float32)), 30)
    return out


def _evaluate(s: dict[str, Path], *extra: str) -> list[str]:
    return ["evaluate", "--train", str(s["train"]), "--test", str(s["test"]), "--ood",
            f"ood={s['ood']}", "--quiet", "--no-report", "--out", "o", *extra]  # fmt: skip


# (id, args builder, words the single error line must contain)
CASES = [
    # wrong type
    ("ssb bin-size type", lambda s: ["splits", "ssb", "--out", "o", "--bin-size", "abc"],
     "Invalid value for '--bin-size'"),
    ("evaluate bootstrap type", lambda s: _evaluate(s, "--bootstrap", "many"),
     "Invalid value for '--bootstrap'"),
    ("detector param type", lambda s: _evaluate(s, "--detector", "knn:k=abc"),
     "knn: k must be an integer >= 1, got 'abc'"),
    # out of range
    ("ssb bin-size range", lambda s: ["splits", "ssb", "--out", "o", "--bin-size", "-5"],
     "bin sizes must be three positive integers"),
    ("zsl fraction range", lambda s: ["splits", "zsl", "--classes", "c", "--images", "i",
                                      "--out", "o", "--unseen-fraction", "1.5"],
     "unseen_fraction must be in (0, 1), got 1.5"),
    ("evaluate bootstrap range", lambda s: _evaluate(s, "--bootstrap", "-3"),
     "--bootstrap: input should be greater than or equal to 0, got -3"),
    ("detector param range", lambda s: _evaluate(s, "--detector", "knn:k=-1"),
     "knn: k must be an integer >= 1, got -1"),
    ("operating point range", lambda s: _evaluate(s, "--operating-point", "1.5"),
     "--operating-point: input should be less than or equal to 1"),
    ("superclass levels range", lambda s: ["splits", "superclass", "--out", "o", "--levels", "-1"],
     "--levels: should be greater than or equal to 1, got -1"),
    # NaN
    ("zsl fraction nan", lambda s: ["splits", "zsl", "--classes", "c", "--images", "i",
                                    "--out", "o", "--unseen-fraction", "nan"],
     "unseen_fraction must be in (0, 1), got nan"),
    ("superclass threshold nan", lambda s: ["splits", "superclass", "--out", "o",
                                            "--threshold", "nan"],
     "threshold: a cosine similarity in [-1, 1], got nan"),
    ("operating point nan", lambda s: _evaluate(s, "--operating-point", "nan"),
     "--operating-point: input should be less than or equal to 1, got nan"),
    # missing
    ("evaluate store missing", lambda s: ["evaluate", "--train", str(s["train"]), "--test",
                                          str(s["test"]), "--ood", "ood=nothing", "--quiet",
                                          "--out", "o"],
     "feature store"),
    ("report folder missing", lambda s: ["report", "nothing"], "nothing"),
    # wrong format
    ("store is a file", lambda s: ["evaluate", "--train", str(s["train"] / "meta.json"), "--test",
                                   str(s["test"]), "--ood", f"ood={s['ood']}", "--quiet",
                                   "--out", "o"],
     "is a file; a feature store is a folder"),
    ("ood without NAME=", lambda s: ["evaluate", "--train", str(s["train"]), "--test",
                                     str(s["test"]), "--ood", str(s["ood"]), "--quiet",
                                     "--out", "o"],
     "--ood: expected NAME=STORE"),
    ("store verify on a file", lambda s: ["store", "verify", str(s["train"] / "meta.json")],
     "is a file; a feature store is a folder"),
    # mismatched
    ("test store of other classes", lambda s: ["evaluate", "--train", str(s["train"]), "--test",
                                               str(s["six"]), "--ood", f"ood={s['ood']}",
                                               "--quiet", "--out", "o"],
     "the store has 6 classes but id_train has 4"),
    # unknown names
    ("unknown detector", lambda s: _evaluate(s, "--detector", "knnn"), "did you mean"),
    ("unknown benchmark", lambda s: ["benchmark", "check", "ssb-nope", "--root", "."],
     "ssb-nope"),
    ("unknown taxonomy node", lambda s: ["taxonomy", "distance", "dog.n.01", "nope.n.01"],
     "unknown wordnet-3.0 node 'nope.n.01'"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "build", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(stores, tmp_path, cli, case, build, words) -> None:
    res = cli(build(stores), cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and words in lines[0], lines[0]
    # nothing that looks like results; a run that stopped records why in results.json
    assert not (tmp_path / "o" / "results.parquet").exists()
    if (tmp_path / "o" / "results.json").exists():
        notes = json.loads((tmp_path / "o" / "results.json").read_text())["notes"]
        assert notes["failed"].split(": ")[-1] in lines[0]  # the CLI names the option
