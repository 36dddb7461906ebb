"""The autotuner pass on real modules: S0's flip and its BLAS fission, S4's
rejected config, forced backends, the JSON cache and XLA's results files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hlorun.text.parser import load_module
from hlorun.passes import pass_class
from hlorun.passes.base import Target
from hlorun.text.printer import print_module
from hlorun.errors import PassError, UsageError
from hlorun.verifier.checkers import get_checker

from ..conftest import TESTDATA, shared_path

AT = pass_class("autotuner")
GF = pass_class("triton-gemm-rewriter")
S0 = TESTDATA / "s0" / "autotuner_input.hlo"
S4 = TESTDATA / "s4" / "gemm_add_bf16.hlo"
ROCM = Target("rocm", "MI300X", "gfx942")


def tune(path, **opts):
    m = load_module(path)
    p = AT(target=opts.pop("target", ROCM), **opts)
    p.run(m)
    return m, p


def s4_fused():
    m = load_module(S4)
    GF(target=Target()).run(m)
    return m


def violations(m):
    return get_checker("reshape-is-bitcast").check(m)


# -- S0 ---------------------------------------------------------------------

def test_s0_model_keeps_triton():
    m, p = tune(S0, device="MI300X")
    d = p.decisions[0]
    assert d.winner.backend == "triton" and d.runner_up.backend == "hipblaslt"
    # a near-tie: Triton wins by the model or within XLA's 2 us scratch window
    assert abs(d.margin) < 0.5 and d.flip_rate is None
    assert d.winner.ns - d.runner_up.ns < 2000
    assert not violations(m)


def test_s0_flip_reproduces_with_xla_sampling_under_contention():
    _, p = tune(S0, device="MI300X", mode="noisy", contention="high", sampling="xla", flip_seeds=100)
    d = p.decisions[0]
    assert d.flip_rate >= 0.15, d.flip_rate
    # a seed where the BLAS library wins: the fission pins the layout and the
    # reshape downstream is no longer a bitcast (the RET_CHECK of S0)
    broken = None
    for seed in range(40):
        m, q = tune(S0, device="MI300X", mode="noisy", contention="high", sampling="xla", seed=seed, flip_seeds=0)
        if q.decisions[0].winner.backend == "hipblaslt":
            broken = m
            break
    assert broken is not None
    v = violations(broken)
    assert len(v) == 1 and "ReshapeIsBitcast" in v[0].message and "reshape.2" in v[0].message


def test_s0_flip_vanishes_with_fair_sampling():
    _, x = tune(S0, device="MI300X", mode="noisy", contention="high", sampling="xla", flip_seeds=100)
    _, p = tune(S0, device="MI300X", mode="noisy", contention="high", sampling="fair", flip_seeds=100)
    assert p.decisions[0].flip_rate <= 0.05 < 0.15 <= x.decisions[0].flip_rate
    _, q = tune(S0, device="MI300X", mode="noisy", contention="none", sampling="xla")
    assert q.decisions[0].flip_rate is None and q.decisions[0].winner.backend == "triton"


def test_noisy_is_deterministic_per_seed():
    a = [tune(S0, device="H100", mode="noisy", contention="high", seed=s, flip_seeds=5)[1].decisions[0].winner.key
         for s in range(6)]
    b = [tune(S0, device="H100", mode="noisy", contention="high", seed=s, flip_seeds=5)[1].decisions[0].winner.key
         for s in range(6)]
    assert a == b


# -- S4 ---------------------------------------------------------------------

def test_s4_config_rejected_on_pvc_with_figures():
    m = s4_fused()
    with pytest.raises(PassError) as e:
        AT(target=Target(), device="PVC",
           force_backend="gemm_fusion_dot_general.1=triton:256x256x32/s3/w32").run(m)
    msg = e.value.render()
    assert "needs 262144 B shared memory, device limit 131072 B" in msg
    assert "operand tiles 3 stages x (256x32 x 2 B + 32x256 x 2 B) = 98304 B" in msg
    assert "epilogue layout conversion 256x256 x 4 B = 262144 B" in msg
    assert "had it fit" in msg


def test_s4_config_accepted_on_h100():
    m = s4_fused()
    p = AT(target=Target(), device="H100", force_backend="dot_general.1=triton:256x256x32/s3/w32")
    assert p.run(m)
    d = p.decisions[0]
    assert d.winner.config.label == "256x256x32/s3/w32" and d.winner.resources.smem == 98304
    cfg = m.entry.root.backend_config["fusion_backend_config"]["triton_gemm_config"]
    assert (cfg["block_m"], cfg["block_n"], cfg["block_k"], cfg["num_stages"], cfg["num_warps"]) == \
        ("256", "256", "32", "3", "32")


def test_pvc_rejections_are_listed_with_reasons():
    m = s4_fused()
    p = AT(target=Target(), device="PVC")
    p.run(m)
    d = p.decisions[0]
    assert d.rejected and all(c.reasons for c in d.rejected)
    assert any("device limit 131072 B" in r for c in d.rejected for r in c.reasons)
    missed = [r for r in p.remarks if r.kind == "missed" and r.message.startswith("rejected triton")]
    assert len(missed) == len(d.rejected)
    rec = p.records[-1][1]
    assert rec["considered"] == len(d.candidates) and len(rec["rejected"]) == len(d.rejected)


# -- forced backends ------------------------------------------------------------

def test_force_backend_changes_hlo():
    ma, _ = tune(S0, device="H100", target=Target())
    mb, pb = tune(S0, device="H100", target=Target(), force_backend="cublaslt")
    mc, _ = tune(S0, device="H100", target=Target(), force_backend="gemm_fusion_dot.1=cublaslt:2")
    a, b, c = print_module(ma), print_module(mb), print_module(mc)
    assert "triton_gemm_config" in a and "custom-call" not in a
    assert '__cublas$lt$matmul' in b and "fusion(" not in b.split("ENTRY")[1]
    assert '"selected_algorithm":"2"' in c and pb.decisions[0].source == "forced"
    md, _ = tune(S0, device="H100", target=Target(), force_backend="dot.1=triton:64x64x32/s2/w4")
    assert '"block_m":"64","block_n":"64"' in print_module(md)


def test_force_backend_errors():
    with pytest.raises(UsageError, match="unknown backend 'cudnn'"):
        AT(force_backend="cudnn")
    with pytest.raises(UsageError, match="needs INSTR="):
        AT(force_backend="triton:64x64x32")
    with pytest.raises(PassError, match="cuBLAS is not available on MI300X"):
        tune(S0, device="MI300X", force_backend="cublas", force_strict=True)
    # not strict: the GEMM is autotuned and the reason reported
    _, p = tune(S0, device="MI300X", force_backend="cublas")
    assert p.decisions[0].source == "model"
    assert "cuBLAS is not available on MI300X" in p.infeasible[0].text()
    with pytest.raises(UsageError, match="did you mean hipblaslt"):
        AT(force_backend="hipblast")


MIXED = TESTDATA / "autotune" / "force_mixed_f32_f16.hlo"


@pytest.mark.parametrize("device,target,lib,label", [
    ("MI300X", ROCM, "hipblaslt", "hipBLASLt"), ("H100", Target(), "cublaslt", "cuBLASLt")])
@pytest.mark.parametrize("spec", ["LIB", "blas"])
def test_force_backend_applies_where_feasible_and_says_why_not(device, target, lib, label, spec):
    """One GEMM multiplies f32 operands into f16, which no Lt library takes
    in one call: forcing the Lt library (by name or as ``blas``) forces the
    f16 GEMM, autotunes the other and says why."""
    m, p = tune(MIXED, device=device, target=target,
                force_backend=spec.replace("LIB", lib))
    by = {d.instruction: d for d in p.decisions}
    assert by["gemm_fusion_dot.1"].source == "forced"
    assert by["gemm_fusion_dot.1"].winner.backend == lib
    assert by["gemm_fusion_dot.2"].source == "model"
    assert by["gemm_fusion_dot.2"].winner.backend == "triton"
    [bad] = p.infeasible
    assert bad.instruction == "gemm_fusion_dot.2" and bad.problem == "128x64x512 f32->f16"
    assert bad.reasons == [f"{label} has no f32 x f32 -> f16 GEMM (its type table takes "
                           f"f32xf32->f32)"]
    assert bad.instead.startswith("triton ")
    text = print_module(m)
    assert text.count("__cublas$lt$matmul") == 1 and "gemm_fusion_dot.2 = " in text
    rec = [r for kind, r in p.records if r["instruction"] == "gemm_fusion_dot.2"][0]
    assert rec["force_infeasible"]["reasons"] == bad.reasons
    summary = [r for r in p.remarks if r.kind == "analysis" and "force" in r.message]
    assert "forced 1 of 2 GEMMs; 1 could not take it" in summary[0].message


def test_force_backend_strict_fails_with_the_reason():
    with pytest.raises(PassError, match=r"gemm_fusion_dot.2 \[128x64x512 f32->f16\]: "
                                        r"--force-backend hipblaslt cannot run it: hipBLASLt has no "
                                        r"f32 x f32 -> f16 GEMM"):
        tune(MIXED, device="MI300X", force_backend="hipblaslt", force_strict=True)


def test_force_backend_unknown_instruction_is_an_error_with_did_you_mean():
    with pytest.raises(PassError, match=r"no GEMM matches 'dot\.9'; did you mean dot\.2 or "
                                        r"dot\.1\? GEMMs in this module: dot\.1, dot\.2"):
        tune(MIXED, device="MI300X", force_backend="dot.9=triton")
    with pytest.raises(PassError, match="did you mean gemm_fusion_dot.1"):
        tune(MIXED, device="MI300X", force_backend="gemm_fusoin_dot.1=hipblaslt")
    # globs that match something are fine
    _, p = tune(MIXED, device="MI300X", force_backend="gemm_fusion_dot.*=triton")
    assert all(d.source == "forced" for d in p.decisions)


# -- cache and XLA results -----------------------------------------------------------

def test_cache_round_trip(tmp_path):
    cache = tmp_path / "tune.json"
    m1, p1 = tune(S0, device="MI300X", cache=str(cache))
    data = json.loads(cache.read_text())
    assert data["hlorun_autotune_cache"] == 1 and len(data["entries"]) == 1
    text1 = cache.read_text()
    m2, p2 = tune(S0, device="MI300X", cache=str(cache))
    assert p2.decisions[0].source == "cache"
    assert p2.decisions[0].winner.key == p1.decisions[0].winner.key
    assert print_module(m1) == print_module(m2)
    assert cache.read_text() == text1
    # a cached BLAS choice replays as a fission
    m3, p3 = tune(S0, device="MI300X", cache=str(tmp_path / "b.json"), force_backend="hipblaslt:3".replace(":3", ""))
    m4, p4 = tune(S0, device="MI300X", cache=str(tmp_path / "b.json"))
    assert p4.decisions[0].source == "cache" and p4.decisions[0].winner.backend == "hipblaslt"
    assert print_module(m3) == print_module(m4)
    # another device does not reuse the entry
    _, p5 = tune(S0, device="H100", cache=str(cache))
    assert p5.decisions[0].source == "model"


def test_bad_cache_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(UsageError, match="cannot read autotune cache"):
        tune(S0, device="H100", cache=str(bad))


def test_xla_results_replay_on_gemm_sweep():
    """Every GEMM of the sweep: our triton-gemm-rewriter on XLA's input, then
    the autotuner replaying XLA's autotune_results.textproto, gives XLA's
    backend, and XLA's exact Triton config."""
    root = shared_path("xla-dumps/gemm_sweep")
    done = 0
    from hlorun.autotune.xla_logs import read_results
    for d in sorted(root.iterdir()):
        before = next(d.glob("*before_optimizations.txt"))
        final = next(d.glob("*after_optimizations.txt")).read_text()
        m = load_module(before)
        GF(target=Target("cuda", "H200", "9.0")).run(m)
        gemm_entries = [e for e in read_results(d / "autotune_results.textproto") if e.config.is_gemm]
        if not gemm_entries:
            continue  # the 1xNxK programs: XLA strength-reduced them, no GEMM was tuned
        p = AT(target=Target("cuda", "H200", "9.0"), xla_results=str(d / "autotune_results.textproto"))
        p.run(m)
        dec = p.decisions[0]
        assert dec.source == "xla-results", d.name
        out = print_module(m)
        entry = gemm_entries[0]
        if "__cublas$lt$matmul" in final:
            assert dec.winner.backend == "cublaslt" and "__cublas$lt$matmul" in out, d.name
        else:
            assert dec.winner.backend == "triton" and dec.winner.config == entry.config.triton, d.name
            assert "triton_gemm_config" in out
        done += 1
    assert done == 26


@pytest.mark.parametrize("name,matched", [("dot_general_gqa_cublaslt", 1), ("fp8_matmul_scaled", 1),
                                          ("gemm_bias_gelu_bf16", 1), ("cnn_fp16", 2),
                                          ("permute_rows_donated", 0)])
def test_xla_results_on_other_dumps(name, matched):
    d = shared_path("xla-dumps", name)
    m = load_module(next(d.glob("*before_config_assignment.txt")))
    p = AT(target=Target("cuda", "H200", "9.0"), xla_results=str(d / "autotune_results.textproto"))
    p.run(m)
    info = [r for r in p.remarks if r.message.startswith("XLA autotune results")][0]
    assert len(info.data["matched"]) == matched
    if name == "cnn_fp16":
        # two Triton entries keyed by XLA fingerprints, two GEMMs: each bound
        # by its hlo_fingerprint (XLA's own module: the fusions are XLA's)
        assert info.data["gemm_entries"] == 2 and info.data["unmatched"] == 0
        assert "2 by XLA's HLO fingerprint" in info.data["how"]
        assert all(d.source == "xla-results" for d in p.decisions)
    if name == "dot_general_gqa_cublaslt":
        assert p.decisions[0].winner.backend == "cublaslt"
        assert '"selected_algorithm":"0"' in print_module(m)
        assert '"autotune_workspace_size":"33554432"' in print_module(m)


def test_search_space_memo_matches_a_fresh_generation():
    """Identical GEMMs share one generated search space (as XLA's autotuner
    deduplicates them); the memoised configs equal a fresh generation for
    every GEMM of a real module, and differ between devices."""
    from hlorun.autotune.candidates import search_space_configs
    from hlorun.autotune.devices import get_device
    from hlorun.autotune.problem import gemm_problem
    from hlorun.autotune.triton import SearchSpace

    m = load_module(shared_path("xla-dumps", "gemm_bias_gelu_bf16").glob(
        "*before_optimizations.txt").__next__())
    GF(target=Target("cuda", "H100", "9.0")).run(m)
    gemms = [i for c in m.computations for i in c.instructions
             if i.opcode == "fusion" and "__triton_gemm" in str(i.attrs.get("backend_config", ""))]
    assert gemms
    for name in ("H100", "PVC"):
        d = get_device(name)
        for g in gemms:
            p = gemm_problem(g)
            first = search_space_configs(p, d)
            assert search_space_configs(p, d) is first
            assert list(first) == SearchSpace(p, d).configs()
    p = gemm_problem(gemms[0])
    assert search_space_configs(p, get_device("H100")) != search_space_configs(p, get_device("PVC"))
