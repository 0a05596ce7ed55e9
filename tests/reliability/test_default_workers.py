"""``semshift extract`` decodes with as many workers as the machine has CPUs (at most 4): no
more than the CPUs, so torch never warns about too many DataLoader workers."""

from __future__ import annotations

import os

import pytest

from semshift.features.data import default_workers

from .conftest import extract_args


@pytest.mark.parametrize(("cpus", "want"), [(1, 1), (2, 2), (3, 3), (16, 4)])
def test_default_workers_is_the_cpus_at_most_four(monkeypatch, cpus, want):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    assert default_workers() == want
    assert default_workers(most=2) == min(2, cpus)


def test_extract_without_workers_uses_the_default_and_torch_does_not_warn(
    cli, images, tiny, tmp_path
):
    args = extract_args(images, tiny, tmp_path / "store")
    i = args.index("--workers")
    del args[i : i + 2]
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert f"with {default_workers()} decoding worker(s)" in done.stdout
    assert "worker processes in total" not in done.stderr
