"""Fixtures of the zero-shot tests."""

from __future__ import annotations

import pytest

from semshift.training.zsl import ZSLData

from .planted import planted


@pytest.fixture(scope="session")
def planted_data() -> ZSLData:
    return planted()
