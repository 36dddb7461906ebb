"""bench/autotune_near_cases.py: shapes near a CV miss keep the properties
the neighbour correction separates (16-byte row alignment per dimension,
K's masking for block_k x split_k <= 128) and stay within the collector's limits."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "autotune_near_cases", Path(__file__).resolve().parents[2] / "bench" / "autotune_near_cases.py")
near = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(near)


@pytest.mark.parametrize("shape,dt", [((16, 112, 320, 264), "tf32"), ((1, 1296, 1296, 1296), "f16"),
                                      ((8, 1707, 76, 344), "tf32"), ((1, 7216, 688, 112), "fp8"),
                                      ((32, 130, 571, 585), "f32")])
def test_near_shapes_keep_alignment_and_k_masking(shape, dt):
    b, m, n, k = shape
    got = near.near_shapes(b, m, n, k, dt, 6, random.Random(1), avoid={(b, m, n, k)})
    assert len(got) == 6 and len(set(got)) == 6 and shape not in got
    by = near.BYTES[dt]
    for nb, nm, nn, nk in got:
        assert near.fits(nb, nm, nn, nk, dt)
        for old, new in ((m, nm), (n, nn), (k, nk)):
            assert (old * by % 16 == 0) == (new * by % 16 == 0)
            assert 0.8 < new / old < 1.2
        assert nk % 128 == k % 128
        assert nb == b or (b > 1 and nb in (2 * b, max(2, b // 2)))
