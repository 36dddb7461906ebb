"""Per-element flop costs of elementwise ops, as XLA:GPU's cost analysis
counts them (``GpuHloCostAnalysis::HandleElementwiseOp`` ->
``FlopsPerElement``, xla/service/gpu/model/gpu_hlo_cost_analysis.cc).

XLA measures the clock cycles of each (opcode, element type) on a device
(``hlo_op_profiler_run``; the table ``hlo_op_profiles_data.h``) and charges
that many flops per element evaluation; an op the table does not list
costs ``kDefaultFlopsPerElement`` = 3.  Ops routed there: the elementwise
unary and binary ops, compare, clamp, select, convert and
reduce-precision.  Copies, broadcasts, slices, iota, reverse and the other
data-movement ops cost nothing.  The element type is the result's (a
compare is priced as PRED, i.e. the default).

Only the H100 table (``sm_90``, measured on "NVIDIA H100 80GB HBM3") is
transcribed here; it is used for every device (XLA looks the table up by
compute capability and falls back to ``sm_86``'s).  BF16 has no entries
on sm_90, so bf16 arithmetic costs the default.
"""

from __future__ import annotations

from ...ir.opcode import ELEMENTWISE

DEFAULT_FLOPS_PER_ELEMENT = 3

# (opcode, element type) -> clock cycles, sm_90
_SM90_INT = {  # divide, multiply, power
    "s8": (356, 7, 122), "s16": (364, 7, 122), "s32": (297, 3, 71), "s64": (685, 11, 253),
    "u8": (300, 7, 122), "u16": (304, 7, 126), "u32": (122, 3, 71), "u64": (629, 11, 253),
}
_FLOAT_OPS = ("cbrt", "cosine", "exponential", "exponential-minus-one", "log", "log-plus-one",
              "rsqrt", "sine", "sqrt", "tanh", "add", "atan2", "divide", "multiply", "power",
              "subtract")
_SM90_FLOAT = {
    "f16": (201, 997, 102, 217, 182, 245, 95, 993, 95, 502, 7, 451, 43, 7, 526, 7),
    "f32": (178, 978, 79, 190, 166, 229, 75, 958, 75, 467, 7, 431, 19, 3, 510, 7),
    "f64": (586, 558, 376, 712, 815, 1259, 277, 554, 332, 431, 15, 930, 526, 15, 2205, 15),
    "c64": (None, 2415, 641, 2055, 756, 633, 3148, 2324, 4344, 2379, 7, 6462, 498, 79, 5532, 7),
    "c128": (None, 1750, 1342, 1275, 2455, 2403, 5500, 1999, 6636, 4613, 15, 13131, 2280, 39,
             8363, 15),
}


def _table() -> dict[tuple[str, str], int]:
    t: dict[tuple[str, str], int] = {}
    for ty, (div, mul, pw) in _SM90_INT.items():
        t["divide", ty], t["multiply", ty], t["power", ty] = div, mul, pw
    for ty, cycles in _SM90_FLOAT.items():
        for op, c in zip(_FLOAT_OPS, cycles):
            if c is not None:
                t[op, ty] = c
    return t


SM90 = _table()

#: opcodes XLA's GPU cost analysis prices by the table (copy costs nothing)
PRICED = (ELEMENTWISE - {"copy"})


def flops_per_element(opcode: str, element_type: str) -> int:
    """Flops XLA charges per element of an ``opcode`` result of ``element_type``
    (0 for ops the cost analysis does not price)."""
    if opcode not in PRICED:
        return 0
    return SM90.get((opcode, element_type), DEFAULT_FLOPS_PER_ELEMENT)


def computation_flops(comp) -> int:
    """Flops of one evaluation of a (scalar) computation such as a reducer:
    the sum of its instructions' (``ProcessSubcomputation``)."""
    total = 0
    for m in comp.instructions:
        if m.shape.is_array:
            n = 1
            for d in m.shape.dimensions:
                n *= d
            total += n * flops_per_element(m.opcode, m.shape.element_type)
    return total


__all__ = ["DEFAULT_FLOPS_PER_ELEMENT", "computation_flops", "flops_per_element"]
