"""How XLA's dot-strength-reduction tests run through our passes.

* ``dot_strength_reduction_test.cc``: ``DotStrengthReduction pass{Hopper}``
  then ``RunHloPass(&pass, ...)``, ``EXPECT_TRUE/FALSE(changed)``, the
  verifier and a FileCheck of ``module->ToString()``: our
  ``dot-strength-reduction`` on an H100 (sm_90).
* ``algebraic_simplifier_test.cc`` (the strength-reduction cases the corpus
  selected): ``AlgebraicSimplifier(options).Run(m.get()).value()`` in
  ``ASSERT_TRUE/FALSE`` or ``RunHloPass(&simplifier, ...)``, with
  ``EXPECT_EQ(N, m->computation_count())`` and ``GmockMatch`` on the root.
  Our ``algsimp`` runs with XLA's generic default options
  (``enable_dot_strength_reduction`` on; hlorun's default is XLA:GPU's, off)
  unless the test's C++ turns it off
  (:data:`ALGSIMP_OPTIONS`, facts read from the test source).
"""

from __future__ import annotations

import re
from typing import Any

from ..ir.module import Module
from .hlo_match import parse_matcher
from .xla_cases import Plan, XlaCase, XlaSuite, split_args

H100 = {"platform": "cuda", "device": "H100", "compute_capability": "9.0"}

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_:.>-]*)\s*\((.*)\)\s*;?\s*$", re.S)

#: Options the tests set in C++ before running AlgebraicSimplifier.
ALGSIMP_OPTIONS: dict[str, dict[str, Any]] = {
    "ConcatIntoScalarDot": {"enable_dot_strength_reduction": False},
    "DotOfConcatRank3LhsRank1Rhs": {"enable_dot_strength_reduction": False},
}


def _computation_count(expected: int):
    def check(module: Module) -> str | None:
        n = len(module.computations)
        return None if n == expected else f"computation_count() == {n}, test expects {expected}"
    return check


def _gmock_root(expr: str):
    pat = parse_matcher(expr, {})

    def check(module: Module) -> str | None:
        why = pat.why_not(module.entry.root)
        return f"GmockMatch fails: {why}" if why else None
    return check


def _algsimp_handler(plan: Plan, suite: XlaSuite, st: str) -> bool:
    m = _CALL.match(st)
    if not m:
        return False
    fn, args = m.group(1), split_args(m.group(2))
    if fn in ("ASSERT_TRUE", "ASSERT_FALSE", "EXPECT_TRUE", "EXPECT_FALSE") and len(args) == 1 \
            and re.fullmatch(r"AlgebraicSimplifier\(\w+\)\.Run\(m(?:\.get\(\))?\)\.value\(\)",
                             args[0].strip()):
        plan.run = True
        plan.expect_changed = fn.endswith("TRUE")
        return True
    if fn == "EXPECT_EQ" and len(args) == 2 and args[1].strip() == "m->computation_count()":
        plan.final_checks.append(_computation_count(int(args[0])))
        return True
    if fn == "EXPECT_THAT" and len(args) == 2 \
            and args[0].strip() == "module->entry_computation()->root_instruction()":
        g = re.match(r"^GmockMatch\((.*)\)$", args[1].strip(), re.S)
        if not g:
            return False
        try:
            plan.final_checks.append(_gmock_root(g.group(1)))
        except ValueError as e:
            plan.unsupported.append(f"GmockMatch({g.group(1)[:60]}): {e}")
        return True
    return False


def _algsimp_configure(case: XlaCase, plan: Plan) -> None:
    short = case.test.split(".", 1)[-1]
    opts = {"enable_dot_strength_reduction": True, **ALGSIMP_OPTIONS.get(short, {})}
    plan.passes = [(name, {**o, **opts}) for name, o in plan.passes]


FUSION_SUITES: dict[str, XlaSuite] = {
    "xla/backends/gpu/transforms/dot_strength_reduction_test.cc": XlaSuite(
        pass_name="dot-strength-reduction",
        target=H100,
        pass_ctors={r"^&?pass$": ("dot-strength-reduction", {})},
    ),
    "xla/hlo/transforms/simplifiers/algebraic_simplifier_test.cc": XlaSuite(
        pass_name="algsimp",
        target=H100,
        handlers=(_algsimp_handler,),
        pass_ctors={r"^&?simplifier$": ("algsimp", {})},
        configure=_algsimp_configure,
    ),
}
