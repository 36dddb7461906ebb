"""Session-7 terms of the calibrated cost model (issue 20): the masked-K
coordinate of the neighbour correction, the FMA path's own unaligned-rows
factor, and refitting a few constants of an existing fit."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from hlorun.autotune import dataset as D
from hlorun.autotune import neighbours
from hlorun.autotune.cost import Tile, eff_class, kernel_time, params_for
from hlorun.autotune.devices import get_device


def _h200_rows() -> list[dict]:
    with open(neighbours.DATA_DIR / "residuals_H200.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_masked_and_unmasked_runs_of_a_config_are_not_neighbours():
    """On the H200, 128x128x64/s3/w4/tma ran 11.1 us on 1280^3 f16 (K a
    multiple of 64) and 31.5 us on 1296^3 (masked K).  Two square bf16 shapes
    outside the train split: 1344 (21 x 64) borrows the config's factor from
    unmasked neighbours, 1104 (69 x 16) from masked ones; without the masked
    coordinate both mix the two.  (1168 until session 8, when the x14_ run put
    1168^3 in the train split.)"""
    train = {(g.problem.batch, g.problem.m, g.problem.n, g.problem.k) for g in D.load("H200", "train")}
    assert (1, 1344, 1344, 1344) not in train and (1, 1104, 1104, 1104) not in train
    label = "128x128x64/s3/w4/tma"
    rows = _h200_rows()
    on = neighbours.Table(rows)
    off = neighbours.Table(rows, replace(neighbours.SETTINGS, mask_weight=0.0))
    assert neighbours.SETTINGS.mask_weight > 0
    got = {}
    for name, tab in (("on", on), ("off", off)):
        for s in (1344, 1104):
            got[name, s] = tab.lookup("triton", label, "f16", 1, s, s, s, (1, 0))
    # the nearest calibrated GEMM has the same masking as the query
    assert int(got["on", 1344].nearest.split("x")[2]) % 64 == 0
    assert int(got["on", 1104].nearest.split("x")[2]) % 64 != 0
    assert "K loop not masked here and in 8 of them" in got["on", 1344].describe()
    assert "K loop masked here and in 8 of them" in got["on", 1104].describe()
    assert "K loop" not in got["off", 1344].describe()
    ratio_on = got["on", 1344].config / got["on", 1104].config
    ratio_off = got["off", 1344].config / got["off", 1104].config
    assert ratio_on < 0.85 and ratio_on < ratio_off - 0.05, (ratio_on, ratio_off)
    # BLAS rows and shape levels have no masked coordinate
    b_on = on.lookup("blas", "", "f16", 1, 1344, 1344, 1344, (1, 0))
    b_off = off.lookup("blas", "", "f16", 1, 1344, 1344, 1344, (1, 0))
    assert b_on.factor == pytest.approx(b_off.factor)


@pytest.mark.parametrize("device", ["H200", "H100"])
def test_unaligned_rows_cost_the_fma_path_its_own_factor(device):
    """Rows that are not a multiple of 16 bytes cost a tensor-core kernel its
    16-byte vector / TMA loads; a dot on the FMA units (f32 at HIGHEST) loads
    4-byte elements and has less to lose.  Fitted on the train split: cuBLASLt
    on the FMA path pays less than on the tensor cores, and the FMA factor
    applies to f32 dots only."""
    d = get_device(device)
    P = replace(params_for(d), measured_device="")
    assert P.unaligned_fma is not None
    assert 1.0 <= P.unaligned_fma["blas"] < P.unaligned["blas"] - 0.5
    same = replace(P, unaligned_fma=dict(P.unaligned))
    test = D.load(device, "test")
    f32 = next(g.problem for g in test if eff_class(g.problem) == "f32")
    tf32 = next(g.problem for g in test if eff_class(g.problem) == "tf32")
    tile = Tile(128, 128, 32, 4, 8, 1, True)
    for p, n, cheaper in ((f32, 1021, True), (f32, 1024, False), (tf32, 1021, False)):
        q = replace(p, m=1024, n=n, k=512)
        ratio = kernel_time(q, d, tile, "blas", 65536, 128, P).ns / kernel_time(q, d, tile, "blas", 65536, 128, same).ns
        assert (ratio < 0.95) == cheaper and ratio <= 1.0 + 1e-9, (p.types_text, n, ratio)


def test_fit_some_refits_only_the_named_constants():
    pytest.importorskip("scipy")
    from hlorun.autotune.fit import fit_some
    d = get_device("H200")
    start = replace(params_for(d), measured_device="")
    gemms = [g for g in D.load("H200", "train") if g.triton and g.blas][:80]
    P, info = fit_some(gemms, d, replace(start, unaligned_fma={"triton": 1.5, "blas": 1.5}),
                       ["unaligned_fma.blas", "iter_ns"], max_nfev=4)
    assert info["refitted"] == ["unaligned_fma.blas", "iter_ns"] and info["loss"] <= info["loss_start"]
    assert P.unaligned_fma["triton"] == 1.5 and P.unaligned == start.unaligned
    assert P.eff == start.eff and P.tile_factors == start.tile_factors and P.launch_us == start.launch_us
    assert (P.unaligned_fma["blas"], P.iter_ns) != (1.5, start.iter_ns)
