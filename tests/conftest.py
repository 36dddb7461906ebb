"""Shared fixtures: where the XLA corpus and dumps live.

The corpus is ``../shared`` next to the checkout (override with
HLORUN_SHARED).  In CI it must be there; elsewhere tests that need it skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HLORUN_SHARED", REPO.parent / "shared"))
TESTDATA = REPO / "testdata"


def shared_path(*parts: str) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        if os.environ.get("CI"):
            raise FileNotFoundError(f"{p} is missing: CI needs ../shared beside the checkout")
        pytest.skip(f"{p} not available")
    return p


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_path()
