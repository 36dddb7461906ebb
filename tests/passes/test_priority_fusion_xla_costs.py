"""Priority fusion's operand reads against XLA's own numbers.

XLA's pass dump of fp8_delayed_scaling_mlp (H200, JAX 0.11.2,
``priority_fusion_dump``) gives ``us_unfused`` / ``us_fused`` for every
producer of the module priority fusion received.  Reproducing them needs
the reads the way XLA's cost analysis counts them:

* a scalar constant operand is read like any other operand (priority
  fusion fuses small constants only after its last step): per broadcast
  element, in the producer and again in every user it is fused into.
  That is what keeps the fp8 scale ``max(amax) * (1/448)`` (f32[4]) a
  kernel of its own: recomputed in its seven users it would re-read its two
  constants once per element of each (XLA: -0.12 us, so not fused);
* an unfused elementwise instruction reads an operand it names twice twice
  (``multiply(x, x)``: EstimateRunTimeForInstruction reads per operand slot);
* start indices of a dynamic-(update-)slice and init values of a reduce keep
  HloCostAnalysis's default utilization 1.0 (read once, not per element);
* a dynamic-update-slice writes its update only and does not read the
  buffer it updates when it is the kernel's output (operand 0 aliases the
  output: HandleDynamicUpdateSlice, FusionProcessOutputBytesAccessed);
  hmm_forward_scan_f32's pass dump prices the transposed update fused into
  the scan's DUS at 2.076 -> 1.029 us."""

from __future__ import annotations

import pytest

from hlorun.passes.base import Target
from hlorun.passes.priority_fusion import PriorityFusion, _Queue
from hlorun.passes.priority_fusion.model import device_of
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import parse_module

from ..conftest import TESTDATA

FP8 = TESTDATA / "passes" / "priority-fusion" / "fp8_delayed_scaling_scale.hlo"


def _queue(module, device: str = "H200") -> _Queue:
    owner = PriorityFusion(target=Target(device=device))
    object.__setattr__(owner, "_device", device_of(owner.target))
    return _Queue(owner, module.entry)


def _times(q: _Queue, name: str) -> tuple[float, float]:
    """(unfused, fused) of fusing ``name`` into all its users, as
    EstimateRunTimes adds them up (one launch per kernel)."""
    p = next(i for i in q.comp.instructions if i.name == name)
    users = list(p.users)
    unfused = len(users) + 1 + q.time(p).time_us + sum(q.time(u).time_us for u in users)
    fused = len(users) + sum(q.fused_time(p, u).time_us for u in users)
    return unfused, fused


# producer -> (us_unfused, us_fused) from XLA's priority_fusion_dump (first
# update_priority of each, before any fusion)
_XLA_FP8 = {
    "broadcast.9": (2.001, 1.00075),            # broadcast(constant) into multiply.1
    "min.0.0": (4.211, 2.34),                   # broadcast(constant 448) into clamp.6
    "broadcast.1.0": (19.6075, 11.638),         # f32[4096,1024] broadcast(constant)
    "integer_pow.2.0": (12.4645, 4.4945),       # multiply(x, x) of the GEMM output
    "divide.1.0": (26.4622498, 18.4927502),
    "multiply.1": (5.00075, 4.004),             # the scale into its four slices
    "slice.14.0": (3.001, 2.001),
}


@pytest.mark.parametrize("producer", sorted(_XLA_FP8))
def test_pair_estimates_match_xlas_dump(producer):
    q = _queue(parse_module(FP8.read_text()))
    unfused, fused = _times(q, producer)
    want_u, want_f = _XLA_FP8[producer]
    assert unfused == pytest.approx(want_u, rel=2e-3, abs=1e-3)
    assert fused == pytest.approx(want_f, rel=2e-3, abs=1e-3)


@pytest.mark.parametrize("device", ["H200", "H100"])
def test_fp8_scale_stays_a_kernel_of_its_own(device):
    module = parse_module(FP8.read_text())
    pipe = load_pipeline("gpu-cuda")
    res = run_pipeline(module, pipe, RunOptions(enable_only=["fusion/priority-fusion"],
                                                target=Target(device=device)))
    assert res.exit_code == 0
    entry = module.entry
    scale = [i for i in entry.instructions if i.opcode == "fusion"
             and i.fused_computation.root.opcode == "multiply" and i.shape.dimensions == (4,)]
    assert len(scale) == 1, "the f32[4] scale is one kernel (XLA's fusion.31)"
    users = {u.opcode for u in scale[0].users}
    assert "slice" in users, "slice.9.0 / slice.10.0 stay unfused (GEMM scale operands)"
    assert len(scale[0].users) == 7


_DUS = """HloModule dus_update

%fused_dus (p0: f32[199,32,64], p1: f32[64,32], p2: s32[], p3: s32[]) -> f32[64,199,32] {
  %p0 = f32[199,32,64]{1,0,2} parameter(0)
  %bitcast.28.0 = f32[64,199,32]{2,1,0} bitcast(%p0)
  %p1 = f32[64,32]{1,0} parameter(1)
  %bitcast.31.0 = f32[64,1,32]{2,1,0} bitcast(%p1)
  %p2 = s32[] parameter(2)
  %p3 = s32[] parameter(3)
  ROOT %dynamic-update-slice.1 = f32[64,199,32]{2,1,0} dynamic-update-slice(%bitcast.28.0, %bitcast.31.0, %p2, %p3, %p2)
}

ENTRY %main (buf: f32[199,32,64], x: f32[32,64], i: s32[]) -> f32[64,199,32] {
  %buf = f32[199,32,64]{1,0,2} parameter(0)
  %x = f32[32,64]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %constant.6.0 = s32[] constant(0)
  %constant.44.0 = s32[] constant(198)
  %subtract.1 = s32[] subtract(%constant.44.0, %i)
  %transpose.9.0 = f32[64,32]{1,0} transpose(%x), dimensions={1,0}
  ROOT %fusion.23 = f32[64,199,32]{2,1,0} fusion(%buf, %transpose.9.0, %constant.6.0, %subtract.1), kind=kLoop, calls=%fused_dus
}
"""


def test_dynamic_update_slice_writes_its_update_only():
    """hmm_forward_scan_f32's backward scan body: the transposed state row
    fused into the DUS that stores it (XLA: 2.07625 -> 1.029 us)."""
    q = _queue(parse_module(_DUS))
    unfused, fused = _times(q, "transpose.9.0")
    assert unfused == pytest.approx(2.07625, rel=5e-3)
    assert fused == pytest.approx(1.029, rel=5e-3)
    dus = next(i for i in q.comp.instructions if i.name == "fusion.23")
    assert q.time(dus).write_bytes == 64 * 32 * 4


_DEFAULT_UTILIZATION = """HloModule default_utilization

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[1024,1024], y: f32[64,64,8]) -> (f32[1024], f32[64,64,1]) {
  %x = f32[1024,1024]{1,0} parameter(0)
  %zero = f32[] constant(0)
  %r = f32[1024]{0} reduce(%x, %zero), dimensions={1}, to_apply=%add
  %y = f32[64,64,8]{2,1,0} parameter(1)
  %c0 = s32[] constant(0)
  %c3 = s32[] constant(3)
  %ds = f32[64,64,1]{2,1,0} dynamic-slice(%y, %c0, %c0, %c3), dynamic_slice_sizes={64,64,1}
  ROOT %t = (f32[1024]{0}, f32[64,64,1]{2,1,0}) tuple(%r, %ds)
}
"""


def test_init_values_and_start_indices_are_read_once():
    q = _queue(parse_module(_DEFAULT_UTILIZATION))
    names = {i.name: i for i in q.comp.instructions}
    # the reduce reads its input and its init value once (4 bytes), not
    # once per output element
    assert q.time(names["r"]).read_bytes == 1024 * 1024 * 4 + 4
    # the dynamic-slice reads the slice and each start index once
    # (HandleDynamicSlice sets no utilization for the indices): three
    # 4-byte index slots
    assert q.time(names["ds"]).read_bytes == 64 * 64 * 4 + 3 * 4


def test_repeated_operand_is_read_per_slot():
    """multiply(x, x) unfused: XLA reads x once per operand slot."""
    text = """HloModule square
ENTRY %main (x: f32[512,4096]) -> f32[512,4096] {
  %x = f32[512,4096]{1,0} parameter(0)
  ROOT %sq = f32[512,4096]{1,0} multiply(%x, %x)
}
"""
    q = _queue(parse_module(text))
    sq = q.comp.root
    once = _queue(parse_module(text.replace("multiply(%x, %x)", "negate(%x)")))
    t_sq, t_neg = q.time(sq), once.time(once.comp.root)
    dram = 512 * 4096 * 4 / device_of(Target(device="H200")).bandwidth * 1e6
    assert t_sq.time_us - t_neg.time_us == pytest.approx(dram, rel=0.05)
