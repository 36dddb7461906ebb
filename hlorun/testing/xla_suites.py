"""Which of our passes runs which XLA test file, and how.

One :class:`~hlorun.testing.xla_cases.XlaSuite` per XLA test file of the
corpus (``corpus/xla/passes/manifest.json``), keyed by the test file's path
as the manifest names it; alphabetical by path.  ``skips`` maps a test name
to the reason we do not run it; every other case is run, and a statement
the harness cannot interpret makes it skipped with that statement as the
reason (see ``python -m hlorun.testing.passcases -v``).
"""

from __future__ import annotations

from pathlib import Path

from ..ir.module import Module
from ..ir.shape import reshape_is_bitcast
from .fusion_suites import FUSION_SUITES
from .gemm_suites import GEMM_SUITES
from .xla_cases import SuiteReport, XlaSuite, load_cases, run_case


def all_reshapes_are_bitcasts(module: Module) -> str | None:
    """CheckReshapeDecomposer's after-pass check (entry computation)."""
    for instr in module.entry._instructions if module.entry else ():
        if instr.opcode == "reshape" and not reshape_is_bitcast(instr.operands[0].shape, instr.shape):
            return f"reshape {instr.name} is not a bitcast after the pass"
    return None


SUITES: dict[str, XlaSuite] = {
    **GEMM_SUITES,  # xla/backends/gpu/transforms/gemm_*_test.cc (see gemm_suites)
    **FUSION_SUITES,  # dot strength reduction (see fusion_suites)
    "xla/hlo/transforms/expanders/reshape_decomposer_test.cc": XlaSuite(
        pass_name="reshape-decomposer",
        check_calls=("CheckReshapeDecomposer",),
        after_check=all_reshapes_are_bitcasts,
    ),
    "xla/service/layout_normalization_test.cc": XlaSuite(
        pass_name="layout_normalization",
        check_calls=("CheckLayoutNormalization",),
        skips={
            "CustomCallTransformerModifiesInPlaceAndReturnsNullopt":
                "needs a C++ custom-call transformer callback passed to the pass",
        },
    ),
}


def run_suite(corpus: Path, test_file: str) -> SuiteReport:
    suite = SUITES[test_file]
    return SuiteReport(test_file, [run_case(c, suite) for c in load_cases(corpus, test_file)])
