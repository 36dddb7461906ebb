"""reduce-window-rewriter / associative-scan-rewriter numerics: every kind of
cumulative scan XLA's ReduceWindowRewriter takes (forward/reverse,
inclusive/exclusive, lengths that need padding, scan dimensions that need
the transpose, nested rewrites of the cross-row scan) gives the same values
as the single reduce-window it replaces (hlorun's evaluator)."""

from __future__ import annotations

import pytest

from hlorun.evaluate import compare_values, evaluate, output_types, random_inputs, tolerance_types
from hlorun.passes import pass_class
from hlorun.text.parser import parse_module

TEMPLATE = """HloModule m

%op (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] {op}(%a, %b)
}}

ENTRY %e (x: f32[{dims}]) -> f32[{out}] {{
  %x = f32[{dims}]{{{layout}}} parameter(0)
  %init = f32[] constant({init})
  ROOT %rw = f32[{out}]{{{layout}}} reduce-window(%x, %init), window={{size={size} pad={pad}}}, to_apply=%op
}}
"""


def _case(shape, dim, op, init, forward=True, exclusive=False):
    n = shape[dim]
    sizes, pads, out = [], [], list(shape)
    for d, s in enumerate(shape):
        if d == dim:
            sizes.append(str(n))
            lo, hi = (n if exclusive else n - 1), 0
            if not forward:
                lo, hi = hi, lo
            pads.append(f"{lo}_{hi}")
            out[d] = n + 1 if exclusive else n
        else:
            sizes.append("1")
            pads.append("0_0")
    layout = ",".join(str(d) for d in reversed(range(len(shape))))
    return TEMPLATE.format(op=op, init=init, dims=",".join(map(str, shape)),
                           out=",".join(map(str, out)), layout=layout, size="x".join(sizes),
                           pad="x".join(pads))


CASES = [
    ((4, 4096), 1, "add", 0, True, False),      # jnp.cumsum: nested rewrite 4096 -> 256 -> 16
    ((3, 1000), 1, "add", 0, True, False),      # padded to 1008
    ((100, 8), 0, "multiply", 1, True, False),  # cumprod over a major dimension
    ((2, 300, 3), 1, "maximum", "-inf", False, False),  # reverse cummax
    ((5, 70), 1, "add", 0, True, True),         # exclusive
    ((70, 2), 0, "minimum", "inf", False, True),  # reverse exclusive, transposed
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[2]}-{'x'.join(map(str, c[0]))}-d{c[1]}"
                         f"{'-rev' if not c[4] else ''}{'-excl' if c[5] else ''}")
def test_tree_scan_matches_single_reduce_window(case):
    text = _case(*case)
    before = parse_module(text)
    after = parse_module(text)
    rewriter = pass_class("reduce-window-rewriter")()
    assert rewriter.run(after)
    windows = [i for i in after.entry.instructions if i.opcode == "reduce-window"]
    assert all(max(int(s) for s in i.attrs["window"].split()[0][len("{size="):].split("x")) <= 16
               for i in windows), [i.attrs["window"] for i in windows]
    args = random_inputs(before, 0)
    cmp = compare_values(evaluate(before, args), evaluate(after, args), output_types(before),
                         tolerance_types=tolerance_types(before))
    assert cmp.ok, "; ".join(leaf.describe() for leaf in cmp.leaves if not leaf.ok)
