"""Out of memory and refused threads (issue 20, defect 3): one line per detector, the rest kept.

A 200k x 512 store under a 2 GB address-space limit failed in the store gather with NumPy's
``_ArrayMemoryError`` (a traceback, exit 1), and at 3 GB the whole protocol was lost to
``RuntimeError: can't start new thread``. These tests produce the same failures on purpose
(a gather or a detector that raises them, a thread pool that refuses threads) and check that
each failing detector gets one line saying how much memory it needed and how to lower it,
and that the other detectors' results are exactly those of a run without the failure.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from semshift import detectors as D
from semshift.errors import InputError
from semshift.run import run
from semshift.run.context import one_line
from tests.run.conftest import base_config, build_stores


def _numpy_memory_error() -> MemoryError:
    """The error NumPy raises for an allocation it cannot make (its own message)."""
    try:
        np.empty((1 << 44,), np.float32)  # 64 TiB
    except MemoryError as err:
        return err
    raise AssertionError("numpy allocated 64 TiB")  # pragma: no cover


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_stores(tmp_path_factory.mktemp("mem_stores"))


def _results(out) -> pd.DataFrame:
    frame = pd.read_parquet(out / "results.parquet")
    return frame.sort_values(list(frame.columns[:6])).reset_index(drop=True)


def test_the_message_says_how_much_and_how_to_lower_it() -> None:
    msg = one_line(_numpy_memory_error())
    assert msg.startswith("out of memory: Unable to allocate ")
    assert "SEMSHIFT_THREADS=1" in msg and "SEMSHIFT_BLOCK_ROWS" in msg
    thread = one_line(RuntimeError("can't start new thread"))
    assert thread.startswith("out of memory: the system refused a new thread")


def test_features_that_do_not_fit_fail_only_the_detectors_that_need_them(
    stores, tmp_path, monkeypatch
) -> None:
    from semshift.features import store as store_mod

    real = store_mod.Selection.arrays

    def gather(self, *names):  # the id_train features (240 rows) cannot be allocated
        if "features" in names and len(self) == 240:
            raise _numpy_memory_error()
        return real(self, *names)

    dets = ["msp", "energy", "knn", "mahalanobis"]
    run(base_config(stores, tmp_path / "ok", detectors=dets, protocols={"osr": {}}),
        progress=False)  # fmt: skip
    monkeypatch.setattr(store_mod.Selection, "arrays", gather)
    result = run(base_config(stores, tmp_path / "short", detectors=dets,
                             protocols={"osr": {}}), progress=False)  # fmt: skip
    errors = "\n".join(result.errors)
    for name in ("knn", "mahalanobis"):
        want = f"detector {name}: fit failed on id_train: loading id_train features: out of memory"
        assert f"{want}: Unable to allocate" in errors
    assert "msp" not in errors and "energy" not in errors
    ok, short = _results(tmp_path / "ok"), _results(tmp_path / "short")
    for name in ("msp", "energy"):  # the others' results are exactly those of a full run
        a = ok[ok["detector"] == name].reset_index(drop=True)
        b = short[short["detector"] == name].reset_index(drop=True)
        assert a["error"].isna().all() and b["error"].isna().all()
        cols = [c for c in a.columns if c != "error"]  # (all-empty error column: its dtype)
        pd.testing.assert_frame_equal(a[cols], b[cols])
    notes = json.loads((tmp_path / "short" / "results.json").read_text())
    assert "failed" not in notes["notes"]


def test_a_detector_out_of_memory_is_one_line_and_the_others_go_on(
    stores, tmp_path, monkeypatch
) -> None:
    cls = D.get_class("knn")

    def fit(self, **inputs):
        raise _numpy_memory_error()

    monkeypatch.setattr(cls, "fit", fit)
    result = run(base_config(stores, tmp_path / "out", detectors=["msp", "knn"],
                             protocols={"osr": {}}), progress=False)  # fmt: skip
    lines = [e for e in result.errors if "knn" in e]
    assert lines and all("\n" not in e for e in lines)
    assert "detector knn: fit failed on id_train: out of memory: Unable to allocate" in lines[0]
    frame = _results(tmp_path / "out")
    assert frame[frame["detector"] == "msp"]["value"].notna().all()


def test_refused_threads_give_the_same_results_in_the_calling_thread(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    feats = np.abs(rng.normal(size=(300, 16))).astype(np.float32)
    w = rng.normal(size=(5, 16)).astype(np.float32)
    b = rng.normal(size=5).astype(np.float32)
    logits = feats @ w.T + b
    labels = np.arange(300) % 5
    names = ["msp", "energy", "knn", "mahalanobis", "vim", "react"]

    def fitted(threads: int):
        return D.fit_many({n: D.get(n) for n in names}, {"logits": logits, "features": feats,
                          "head": (w, b), "labels": labels}, threads=threads)  # fmt: skip

    want_fit = fitted(1)
    want = D.score_many(want_fit.fitted, logits=logits, features=feats, threads=1)
    real_submit = ThreadPoolExecutor.submit
    calls = {"n": 0}

    def submit(self, fn, *args, **kwargs):  # the third thread is refused
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise RuntimeError("can't start new thread")
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit)
    done: list[str] = []
    got_fit = D.fit_many({n: D.get(n) for n in names}, {"logits": logits, "features": feats,
                         "head": (w, b), "labels": labels}, threads=4,
                         on_done=done.append)  # fmt: skip
    assert sorted(done) == sorted(names) and not got_fit.errors
    got = D.score_many(got_fit.fitted, logits=logits, features=feats, threads=4)
    assert calls["n"] >= 3 and not got.errors
    for n in names:
        np.testing.assert_allclose(got.scores[n], want.scores[n], rtol=1e-5, atol=1e-6)


def test_the_environment_knobs_are_checked(monkeypatch) -> None:
    from semshift.detectors import default_threads
    from semshift.run.score import block_rows

    monkeypatch.setenv("SEMSHIFT_THREADS", "3")
    monkeypatch.setenv("SEMSHIFT_BLOCK_ROWS", "4096")
    assert default_threads() == 3 and block_rows() == 4096
    monkeypatch.setenv("SEMSHIFT_THREADS", "many")
    with pytest.raises(InputError, match="SEMSHIFT_THREADS='many'"):
        default_threads()
    monkeypatch.setenv("SEMSHIFT_BLOCK_ROWS", "0")
    with pytest.raises(InputError, match="SEMSHIFT_BLOCK_ROWS='0'"):
        block_rows()


def test_a_shared_failure_names_the_detector_that_raises_it() -> None:
    """A mahalanobis row used to say 'knn.score: ...' when both waited on one computation."""
    import threading
    import time

    from semshift.detectors import SharedResults

    shared = SharedResults(logits=np.zeros((2, 2)))
    started = threading.Event()
    seen: dict[str, str] = {}

    def knn() -> None:
        def compute() -> None:
            started.set()
            time.sleep(0.3)
            raise InputError("knn.score: cannot")

        try:
            shared.get("key", compute)
        except InputError as err:
            seen["knn"] = str(err)

    def mahalanobis() -> None:
        started.wait()

        def compute() -> None:
            raise InputError("mahalanobis.score: cannot")

        try:
            shared.get("key", compute)
        except InputError as err:
            seen["mahalanobis"] = str(err)

    threads = [threading.Thread(target=f) for f in (knn, mahalanobis)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"knn": "knn.score: cannot", "mahalanobis": "mahalanobis.score: cannot"}
