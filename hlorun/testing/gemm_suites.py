"""How XLA's GEMM rewriter tests run through our passes.

XLA's GEMM tests use four drivers, read from each case's statements:

* ``RunAndFilecheckHloRewrite(hlo, GemmRewriter(cc, toolkit, options), pattern)``
  and ``RunHloPass(&pass, ...)``: our ``cublas-gemm-rewriter`` with the
  options and target the constructor names (``se::CudaComputeCapability{}``
  is sm_0.0, ``CudaHopperOrRocmCapability()`` sm_90; a ``pass`` declared in
  C++ comes from :data:`TESTS`);
* ``MatchOptimizedHlo`` / ``GetOptimizedModule``: XLA's whole GPU pipeline.
  We run the passes of it that touch GEMMs and exist here
  (:func:`optimized_pipeline`); cases whose patterns need other stages
  (fusion, autotuning, padding, algebraic simplification) are skipped with
  the reason in :data:`SKIPS`;
* ``GmockMatch(m::...)`` assertions: interpreted by :mod:`hlo_match`;
* ``RunAndCompare`` / ``CheckFp8IfSupported``: they run the module on a GPU
  and compare numerics with the interpreter.  That part cannot run here and
  is not claimed; the structural part of ``CheckFp8IfSupported`` (the
  optimized module's custom call is ``__cublas$lt$matmul$f8``) is checked.

``Capability()`` (the test machine) is an H100 (sm_90, CUDA 12.8) unless
:data:`TESTS` says otherwise (ROCm-only tests run on gfx942, as XLA's ROCm
CI does; Blackwell-only tests on sm_100; pre-Ada tests on sm_80).
"""

from __future__ import annotations

import re
from typing import Any

from ..ir.module import Module
from .hlo_match import parse_matcher
from .fixtures import run_passes
from .xla_cases import Plan, XlaCase, XlaSuite, split_args

H100 = {"platform": "cuda", "device": "H100", "compute_capability": "9.0"}
MI300 = {"platform": "rocm", "device": "MI300X", "compute_capability": "gfx942"}

GEMM = "cublas-gemm-rewriter"


def optimized_pipeline(threshold: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The GEMM-relevant slice of XLA's GPU pipeline (gpu_compiler.cc), with
    the passes hlorun has, in XLA's order: DotDecomposer and TransposeFolding
    (optimization), layout assignment, ReshapeDecomposer + LayoutNormalization
    (layout_normalization), then hlo_normalization's TransposeFolding,
    ReshapeDecomposer, GemmRewriter (FP8, then non-FP8), broadcast folding,
    ReshapeDecomposer + LayoutNormalization, and a final DCE.  Missing stages
    (algebraic simplifier, padding, fusion, autotuning) are why the cases
    listed in :data:`SKIPS` are skipped."""
    return [("dot_decomposer", {}), ("transpose-folding", {}), ("layout-assignment", {}),
            ("reshape-decomposer", {}), ("layout_normalization", {}),
            ("transpose-folding", {}), ("reshape-decomposer", {}),
            (GEMM, {"size_threshold": threshold}),
            ("cublas-gemm-broadcast-folding-rewriter", {}),
            ("reshape-decomposer", {}), ("layout_normalization", {}), ("dce", {})]


#: Per-test facts that live in the test's C++ code (test name without the
#: fixture): "pass" = options of a GemmRewriter declared in C++,
#: "target"/"toolkit" = the machine the test needs, "expect_changed" = the
#: branch we run when the manifest merged two platform branches.
TESTS: dict[str, dict[str, Any]] = {
    "ApproxGeluActivationWithAuxAndBitcastAndExtraBitcastUser": {"pass": {"fp8": "none"}},
    "ApproxGeluActivationWithAuxAndBitcastAndExtraDotUser": {"pass": {"fp8": "none"}},
    "ApproxGeluActivationBitcast": {"pass": {"fp8": "none"}},
    "DoNotUpconvertOutput": {"pass": {"fp8": "none"}},
    "UnsupportedMixTypeGemm": {"pass": {"fp8": "none"}},
    "CheckIsGemmAliasedBeforeFusion": {"pass": {"fp8": "none"}},
    "RewriterReportsChangeWhenAddingWorkspace": {"pass": {"fp8": "none", "toolkit_version": "0.0.0"},
                                                 "target": {**H100, "compute_capability": "0.0"}},
    "UnsupportedGemmFusionF16": {"pass": {"fp8": "none", "toolkit_version": "0.0.0"},
                                 "target": {**H100, "compute_capability": "0.0"}},
    # ROCm >= 7 only (SiLU epilogue).
    "MatrixBiasSwishActivation": {"target": MI300, "toolkit": "7.0.0"},
    "SwishActivationWithBitcastAndAuxiliaryOutput": {"target": MI300, "toolkit": "7.0.0",
                                                     "pass": {"fp8": "none"}},
    # FP8 tests with a GemmRewriter declared in C++.
    **{t: {"pass": {"fp8": "only"}} for t in (
        "ScaledABUnscaledDBitcastF8", "ScaledABUnscaledDDynamicSliceF8", "ScaledABUnscaledDSelectF8",
        "ScaledABUnscaledDSelectNonzeroConstantF8", "Rank3ScaledABUnscaledDVectorBiasF8",
        "Rank3ScaledABUnscaledDVectorBiasPaddedF8", "Rank3ScaledABUnscaledDMatrixBiasF8",
        "Rank3ScaledABUnscaledDMatrixBiasPaddedF8", "ScaledABUnscaledDMatrixBiasWithSliceF8")},
    # GemmBroadcastFoldingRewriteTest.*PassChanged / *BatchDimNonZero: the
    # GemmRewriter runs first, the changed checked is the folding pass's.
    **{t: {"setup": [(GEMM, {"fp8": "none", "toolkit_version": "12.4.0"})],
           "passes": [("cublas-gemm-broadcast-folding-rewriter", {})]} for t in (
        "BroadcastedStridedRewriteRhsPassChanged", "BroadcastedStridedRewriteLhsPassChanged",
        "LHSBatchDimNonZero", "RHSBatchDimNonZero")},
    # FNUZ types: the CUDA branch (the manifest merges it with the MI300 one,
    # whose pattern it filled with CUDA's f8e4m3fn): cuBLAS-LT has no FNUZ
    # kernels, the FP8 rewriter leaves the module unchanged.
    "FnuzTypeF8": {"expect_changed": False, "filecheck": False, "pass": {"fp8": "only"}},
    # Platform branches the manifest merged: the branch whose pattern lines
    # ("lines", indices into the case's pattern lines) our run reproduces.
    "CheckCustomCallTarget": {"lines": [0]},  # xla_gpu_enable_cublaslt (LT only at this commit)
    "CheckCustomCallHipblasLtBF16": {"lines": [2, 3], "target": MI300},  # non-MI200 ROCm
    "BF16Gemm": {"lines": [0], "target": MI300},  # ROCm: no cublas-pad-for-gemms padding
    "BF16GemmStrided": {"lines": [0], "target": MI300},
    "BF16VectorBiasPadded": {"lines": [3, 4, 5], "target": MI300},
    "ApproxGeluActivationBF16": {"lines": [3, 4, 5], "target": MI300},
    # Runs on Blackwell only / pre-Ada only.
    "NoTransposeOnBlackwellF8": {"target": {**H100, "compute_capability": "10.0"}},
    "DoNotRewriteToF8OnPreAda": {"target": {**H100, "compute_capability": "8.0"}},
    "DoNotRewriteOnPreAdaWithF32Output": {"target": {**H100, "compute_capability": "8.0"}},
}

_FUSION = "the pattern checks XLA's fusion output (fusion/kLoop/NATIVE_EMITTER), which runs after GEMM rewriting"


_ALGSIMP = ("needs the algebraic simplifier (XLA's optimized module has the identity transposes "
            "and bitcast chains left by dot_decomposer/layout normalization folded away)")
_PAD = "needs cublas-pad-for-gemms (pads the operands to multiples of 4/8 before the rewrite)"

#: Tests we do not run, with the reason.
SKIPS: dict[str, str] = {
    "TestBatchedAutotuning": "checks selected_algorithm, set by the GEMM autotuner (not this pass)",
    "BF16GemmCodeGen": "checks dot strength reduction to multiply+reduce (algebraic simplifier)",
    "BF16Transpose": "checks the algebraic simplifier's transpose/copy handling",
    "VectorBiasWithAlphaScale": _FUSION,
    "VectorBiasSliced": _FUSION,
    "ReluActivationSliced": _FUSION,
    "BatchFromMinorDimTransposeIsNotFolded": _FUSION,
    "SkipSmallMatrixMultiplicationRewrite": _FUSION,
    "VectorBiasSlicedMultipleUsers": "the pattern follows the instruction order of XLA's scheduled, "
                                     "fused module (the slice+add are fused)",
    "Int8Gemm": _PAD + "; the s32 dot of the other branch needs XLA's int8 handling on ROCm/Volta",
    "Int8GemmRankGreaterThanTwo": "pattern template with $0 filled in C++; " + _PAD,
    "Int8GemmNoAlphaRewrite": _PAD + "; the s32 dot of the other branch needs XLA's int8 handling on ROCm/Volta",
    "Int8GemmNoBetaRewrite": _PAD + "; the s32 dot of the other branch needs XLA's int8 handling on ROCm/Volta",
    "Int8GemmNotMultipleOfFour": "pattern template with $0 filled in C++; " + _PAD,
    "BatchedReluActivation": _ALGSIMP,
    "BatchedVectorBiasReluActivation": _ALGSIMP,
    "MultipleContractingDims": _ALGSIMP,
    "VectorBiasIncorrectAxisFusedAsMatrix": _ALGSIMP,
    "VectorBiasTransposedReluActivation": _ALGSIMP,
    "InstrTransposeFoldCheck": "needs the algebraic simplifier's transpose(dot(a, b)) -> dot(b, a) rewrite",
    # gemm_rewriter_fp8_test.cc
    "NoTransposeOnBlackwellF8": "layout assignment here does not model Blackwell's FP8 operand layouts "
                                "(no transpose needed), and the algebraic simplifier is missing",
}


# ---------------------------------------------------------------------------
# Statement handlers
# ---------------------------------------------------------------------------

_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_:.>-]*)\s*\((.*)\)\s*;?\s*$", re.S)
_PATTERN = re.compile(r'^(?:/\*\s*expected\s*=\s*\*/\s*)?R"\(<FileCheck pattern>\)"$')


def _meta(plan: Plan) -> dict[str, Any]:
    m = getattr(plan, "gemm", None)
    if m is None:
        m = {"optimized": 0, "needs_decl": False, "check_fp8": False, "gmock": [], "numerics": False}
        plan.gemm = m  # type: ignore[attr-defined]
    return m


def ctor_options(expr: str) -> tuple[dict[str, Any], dict[str, str]] | None:
    """``GemmRewriter(cc, toolkit[, GemmRewriterOptions{...}])`` ->
    (our pass options, target)."""
    m = re.match(r"^\s*GemmRewriter\s*\((.*)\)\s*$", expr, re.S)
    if not m:
        return None
    args = split_args(m.group(1))
    target = dict(H100)
    cc = args[0] if args else ""
    if "CudaComputeCapability{}" in cc:
        target["compute_capability"] = "0.0"
    elif "Ampere" in cc:
        target["compute_capability"] = "8.0"
    opts: dict[str, Any] = {"fp8": "none"}
    if len(args) > 1:
        v = re.search(r"SemanticVersion\{(\d+),\s*(\d+),\s*(\d+)\}", args[1])
        if v:
            opts["toolkit_version"] = ".".join(v.groups())
    rest = " ".join(args[2:])
    if "kFp8Only" in rest:
        opts["fp8"] = "only"
    if "kNoBias" in rest:
        opts["bias"] = False
    return opts, target


def _handler(plan: Plan, suite: XlaSuite, st: str) -> bool:
    m = _CALL.match(st)
    if not m:
        return False
    fn, args = m.group(1), split_args(m.group(2))
    meta = _meta(plan)
    if fn == "RunAndFilecheckHloRewrite" and len(args) >= 3:
        spec = ctor_options(args[1])
        if spec is not None:
            plan.passes = [(GEMM, spec[0])]
            plan.target = spec[1]
        elif args[1].strip() == "std::move(pass)":
            meta["needs_decl"] = True
        else:
            return False
        plan.run = True
        if re.fullmatch(r"(?:/\*\s*expected\s*=\s*\*/\s*)?std::nullopt", args[2].strip()):
            plan.expect_changed = False
        else:
            plan.expect_changed = True
            plan.filecheck = True
        return len(args) == 3
    if fn == "MatchOptimizedHlo":
        if len(args) < 2 or not _PATTERN.match(args[1].strip()):
            return False
        meta["optimized"] += 1
        plan.run = plan.filecheck = True
        if len(args) > 2 and args[2].strip() == "true":
            plan.print_form = "long"
        return True
    if fn in ("EXPECT_TRUE", "EXPECT_FALSE") and args and args[0].startswith("RunAndCompare("):
        meta["numerics"] = True
        return True  # GPU numerics: not reproducible here (documented)
    if fn == "CheckFp8IfSupported":
        meta["check_fp8"] = True
        return True
    if fn == "EXPECT_THAT" and len(args) == 2 and args[0].strip() == "module->entry_computation()->root_instruction()":
        g = re.match(r"^GmockMatch\((.*)\)$", args[1].strip(), re.S)
        if not g:
            return False
        meta["gmock"].append(g.group(1))
        return True
    if fn in ("TF_ASSERT_OK_AND_ASSIGN", "ASSERT_OK_AND_ASSIGN") and len(args) == 2:
        if "GetOptimizedModule(" in args[1]:
            meta["optimized"] += 1
            plan.run = True
            return True
        if re.search(r"RunHloPass\s*\(\s*&(pass|gemm_rewriter)\b", args[1]):
            meta["needs_decl"] = True
            return False  # _generic records the changed variable
        return False
    if fn in ("ASSERT_OK", "TF_ASSERT_OK") and args == ["filecheck_result.status()"]:
        return True
    if fn == "EXPECT_TRUE" and args == ["filecheck_result.value()"]:
        plan.filecheck = True
        return True
    if fn == "ASSERT_TRUE" and args and args[0] in ("module_status.ok()", "changed_status.ok()"):
        return True
    if fn == "EXPECT_TRUE" and args == ["changed_status.value()"]:
        meta["needs_decl"] = True
        plan.run = True
        plan.expect_changed = True
        return True
    if fn == "EXPECT_TRUE" and args and re.match(r"RunFileCheck\(module->ToString\(\),\s*R\"\(<FileCheck pattern>\)\"\)\s*\.value\(\)$", args[0]):
        plan.filecheck = True
        return True
    if fn == "EXPECT_TRUE" and args == ["verify_status.ok()"]:
        plan.verify = True
        return True
    return False


# ---------------------------------------------------------------------------
# Per-case configuration
# ---------------------------------------------------------------------------


def _fp8_pipeline_check(case: XlaCase, target: dict[str, str]):
    """CheckFp8IfSupported's structural half: the optimized module's first
    custom call is __cublas$lt$matmul$f8."""
    def check(_module: Module) -> str | None:
        from ..text.parser import parse_module
        mod = parse_module(case.hlo_text(), case.entry["file"])
        run_passes(mod, [(n, {**o, "fp8": "all"} if n == GEMM else o)
                         for n, o in optimized_pipeline()], target)
        calls = [i for i in mod.entry.post_order() if i.opcode == "custom-call"]  # FindInstruction
        if not calls:
            return "CheckFp8IfSupported: the optimized module has no custom call"
        if calls[0].custom_call_target != "__cublas$lt$matmul$f8":
            return f"CheckFp8IfSupported: custom call target is {calls[0].custom_call_target}"
        return None
    return check


def _gmock_check(expr: str, target_name: str):
    pat = parse_matcher(expr, {"CustomCallTarget": target_name})

    def check(module: Module) -> str | None:
        why = pat.why_not(module.entry.root)
        return f"GmockMatch fails: {why}" if why else None
    return check


def configure(case: XlaCase, plan: Plan) -> None:
    short = case.test.split(".", 1)[-1]
    spec = TESTS.get(short, {})
    meta = _meta(plan)
    if not plan.run and meta["numerics"] and not plan.unsupported:
        plan.unsupported.append("GPU-execution test: it only compares the compiled module's results "
                                "with the interpreter (RunAndCompare), no structural assertion")
        return
    fp8_file = case.entry["test_file"].endswith("gemm_rewriter_fp8_test.cc")
    threshold = 100 if case.test.startswith("SmallDotGemmRewriteTest.") else 0
    if "lines" in spec:
        lines = case.pattern_lines
        plan.pattern = "\n".join(lines[i] for i in spec["lines"]) + "\n"
        meta["optimized"] = min(meta["optimized"], 1)
    if meta["optimized"] > 1:
        plan.unsupported.append(f"the manifest merges {meta['optimized']} FileCheck patterns of "
                                f"different compilations into one")
        return
    if meta["optimized"]:
        plan.passes = optimized_pipeline(threshold)
    elif "passes" in spec:
        plan.setup = [(n, dict(o)) for n, o in spec.get("setup", [])]
        plan.passes = [(n, dict(o)) for n, o in spec["passes"]]
    elif meta["needs_decl"]:
        if "pass" not in spec:
            plan.unsupported.append("the GemmRewriter is declared in C++ with options the manifest lacks")
            return
        plan.passes = [(GEMM, dict(spec["pass"]))]
    target = dict(spec.get("target") or plan.target or H100)
    plan.target = target
    for name, opts in plan.setup + plan.passes:
        if name == GEMM:
            opts.setdefault("size_threshold", threshold)
            opts.setdefault("json_order", "proto")  # XLA at the corpus commit
            if "toolkit" in spec and "toolkit_version" not in opts:
                opts["toolkit_version"] = spec["toolkit"]
    if "expect_changed" in spec:
        plan.expect_changed = spec["expect_changed"]
    if "filecheck" in spec:
        plan.filecheck = spec["filecheck"]
    rocm = target.get("platform") == "rocm"
    if fp8_file:
        plan.prefixes = ("CHECK", "CHECK-GCN" if rocm else "CHECK-PTX")
    if meta["check_fp8"]:
        plan.after_checks.append(_fp8_pipeline_check(case, target))
    for expr in meta["gmock"]:
        try:
            plan.after_checks.append(_gmock_check(expr, "__cublas$lt$matmul"))
        except ValueError as e:
            plan.unsupported.append(f"GmockMatch({expr[:60]}...): {e}")


def _suite(skips: dict[str, str] | None = None) -> XlaSuite:
    return XlaSuite(pass_name=GEMM, options={"fp8": "none"}, target=dict(H100),
                    check_calls=(), skips=dict(skips or {}), handlers=(_handler,),
                    configure=configure)


GEMM_SUITES: dict[str, XlaSuite] = {
    "xla/backends/gpu/transforms/gemm_broadcast_folding_rewriter_test.cc": _suite(),
    "xla/backends/gpu/transforms/gemm_rewriter_fp8_test.cc": _suite(SKIPS),
    "xla/backends/gpu/transforms/gemm_rewriter_test.cc": _suite(SKIPS),
}
