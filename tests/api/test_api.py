"""hlorun.load / hlorun.compile / CompileResult, driven directly (no CLI):
every kind of source, every option group, the result's fields and the
exception hierarchy, on the repository's realistic modules (S0, S3)."""

from __future__ import annotations

import gzip
import lzma
from dataclasses import dataclass

import pytest

import hlorun
from hlorun.passes import REGISTRY
from hlorun.passes.base import Pass
from hlorun.report.schema import validate
from hlorun.errors import PassError

from ..broken_passes import ALIGN_INPUT_MODULE, ALIGN_INPUT_PIPELINE, SwappedReshapeDecomposer
from ..conftest import TESTDATA

S0 = TESTDATA / "s0" / "jit_dot_general.hlo"
S0_CONSUMER = TESTDATA / "s0" / "jit_dot_general_consumer.hlo"
S3 = TESTDATA / "s3" / "fp8_matmul_scaled.hlo"
NO_TRITON = ("triton-gemm-rewriter",)


# -- load ---------------------------------------------------------------------------------

def test_load_from_path_text_and_module():
    by_path = hlorun.load(S3)
    by_str_path = hlorun.load(str(S3))
    by_text = hlorun.load(S3.read_text())
    assert by_path.name == by_str_path.name == by_text.name == "jit_fn"
    assert by_path.instruction_count == by_text.instruction_count == 24
    assert hlorun.load(by_path) is by_path


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".xz", lzma.open)])
def test_load_compressed(tmp_path, suffix, opener):
    p = tmp_path / ("m.hlo" + suffix)
    with opener(p, "wt") as f:
        f.write(S3.read_text())
    assert hlorun.load(p).instruction_count == 24


def test_load_bad_text_raises_a_located_syntax_error():
    text = S3.read_text().replace("dot(", "dot(%nonexistent, ", 1)
    with pytest.raises(hlorun.HloSyntaxError) as e:
        hlorun.load(text)
    assert e.value.line > 1 and e.value.column > 0
    assert isinstance(e.value, hlorun.HloError) and e.value.exit_code == 1


def test_load_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(hlorun.UsageError, match="no such file"):
        hlorun.load(tmp_path / "missing.hlo")


# -- compile: option groups ---------------------------------------------------------------

def test_selection_disable_enable_limit_and_xla_spellings():
    base = hlorun.compile(S3)
    names = [p.name for p in base.passes]
    assert "transpose-folding" in names
    r = hlorun.compile(S3, disable_passes="transpose-folding")
    assert "transpose-folding" not in [p.name for p in r.passes]
    assert len(r.passes) == len(base.passes) - names.count("transpose-folding")
    r = hlorun.compile(S3, xla_disable_hlo_passes=["transpose-folding"])
    assert "transpose-folding" not in [p.name for p in r.passes]
    r = hlorun.compile(S3, xla_flags="--xla_disable_hlo_passes=transpose-folding --xla_foo=1")
    assert "transpose-folding" not in [p.name for p in r.passes]
    r = hlorun.compile(S3, enable_passes_only=["algsimp", "dce"])
    assert {p.name for p in r.passes} == {"algsimp", "dce"}
    r = hlorun.compile(S3, pass_limit=5)
    assert len(r.passes) == 5 and r.run.stopped_by_limit


def test_options_object_and_keywords_agree():
    opts = hlorun.CompileOptions(selection=hlorun.Selection(disable_passes=("transpose-folding",)))
    assert opts == hlorun.CompileOptions.from_kwargs(disable_passes="transpose-folding")
    a = hlorun.compile(S3, options=opts)
    b = hlorun.compile(S3, disable_passes=["transpose-folding"])
    assert [p.path for p in a.passes] == [p.path for p in b.passes]
    assert hlorun.print_module(a.module) == hlorun.print_module(b.module)
    with pytest.raises(AttributeError):
        opts.selection = hlorun.Selection()  # frozen


def test_diagnostics_diffs_lineage_and_keep_going():
    r = hlorun.compile(S3, diffs="changed")
    changed = [p for p in r.passes if p.changed]
    # passes that change only backend configs have empty diffs in the "diff" form
    configs = ("autotuner", "convert_triton_gemm_config")
    assert changed and all(p.diff() for p in changed if p.name not in configs)
    full = hlorun.compile(S3, diffs="changed", diff_form="full")
    assert any("backend_config" in line for p in full.passes if p.name == "autotuner"
               for line in p.diff())
    tf = next(p for p in changed if p.name == "transpose-folding")
    assert any(line.startswith("-") and "transpose(" in line for line in tf.diff())
    assert [p for p in r.passes if not p.changed][0].diff() == []
    no_diffs = hlorun.compile(S3)
    with pytest.raises(hlorun.UsageError, match="diffs="):
        next(p for p in no_diffs.passes if p.changed).diff()
    gemm = next(k for k in no_diffs.kernels if k.category == "gemm-fusion")
    assert "hlo_normalization/triton-gemm-rewriter" in gemm.formed_by
    assert "dot_general.1" in {o.name for o in gemm.origins}
    plain = hlorun.compile(S3, lineage=False)
    assert [k.name for k in plain.kernels] == [k.name for k in no_diffs.kernels]
    assert all(k.formed_by == [] for k in plain.kernels)


def test_violation_stops_unless_keep_going():
    r = hlorun.compile(S0_CONSUMER, "gpu-rocm-41481", disable_passes=NO_TRITON)
    assert r.status == "violation" and r.exit_code == 2
    v = r.violations[0]
    assert v.rule == "reshape-is-bitcast"
    assert v.after_pass.endswith("cublas-gemm-rewriter") and v.pass_index > 0
    assert v.instruction and "not a bitcast" in v.message
    stopped_at = len(r.passes)
    k = hlorun.compile(S0_CONSUMER, "gpu-rocm-41481", disable_passes=NO_TRITON, keep_going=True)
    assert len(k.passes) > stopped_at and k.violations
    with pytest.raises(hlorun.ViolationError) as e:
        r.raise_for_status()
    assert e.value.result is r and e.value.exit_code == 2
    assert isinstance(e.value, hlorun.CompileError)


def test_autotuning_force_backend_and_decisions():
    r = hlorun.compile(S3)
    (d,) = r.autotune
    assert d.instruction == "gemm_fusion_dot_general.1"
    assert d.winner["backend"] == "triton" and d.margin > 0 and len(d.candidates) >= 2
    f = hlorun.compile(S3, force_backend="cublaslt")
    (fd,) = f.autotune
    assert fd.winner["backend"] == "cublaslt" and fd.source == "forced"
    assert any(k.category.startswith("custom-call:__cublas$lt") for k in f.kernels)


@dataclass(frozen=True)
class _Swapped(SwappedReshapeDecomposer):
    name = "test-api-swapped-reshape-decomposer"


def test_numerics_names_the_wrong_pass(tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, _Swapped.name, "tests.api.test_api:_Swapped")
    for name, status in (("reshape-decomposer", "ok"), (_Swapped.name, "numerics-mismatch")):
        p = tmp_path / f"{name}.yaml"
        p.write_text(ALIGN_INPUT_PIPELINE.replace("DECOMPOSER", name))
        r = hlorun.compile(ALIGN_INPUT_MODULE, str(p), check_numerics="each", seed=3)
        assert r.status == status, r.numerics.to_json()
    assert r.numerics.first_mismatch["pass"] == f"layout_normalization/{_Swapped.name}"
    with pytest.raises(hlorun.NumericsMismatch):
        r.raise_for_status()
    doc = r.to_json()
    assert validate(doc) == [] and doc["status"] == "numerics-mismatch"
    with pytest.raises(hlorun.UsageError, match="need --check-numerics"):
        hlorun.compile(ALIGN_INPUT_MODULE, rtol=1e-3)


def test_device_overrides():
    r = hlorun.compile(S3, platform="rocm", device="MI300X", compute_capability="gfx942")
    t = r.target
    assert (t.platform, t.device, t.compute_capability) == ("rocm", "MI300X", "gfx942")
    assert r.autotune[0].record["device"] == "MI300X"


def test_output_dumps_repro_and_buffers(tmp_path):
    r = hlorun.compile(S0_CONSUMER, "gpu-rocm-41481", disable_passes=NO_TRITON,
                       dump_to=str(tmp_path / "dump"), repro_dir=str(tmp_path / "repro"))
    assert r.dump_files and all((tmp_path / "dump" / f).exists() or f.startswith(str(tmp_path))
                                for f in r.dump_files)
    assert r.repro and (tmp_path / "repro" / "before.hlo").exists()
    again = hlorun.compile(tmp_path / "repro" / "before.hlo", str(tmp_path / "repro" / "repro.yaml"))
    assert again.violations[0].rule == "reshape-is-bitcast"
    b = hlorun.compile(S3, buffers=True)
    assert b.buffers is not None and b.buffers.allocations
    assert hlorun.compile(S3).buffers is None


# -- result ---------------------------------------------------------------------------------

def test_result_fields_and_json_schema():
    m = hlorun.load(S3)
    r = hlorun.compile(m)
    assert m.instruction_count == 24  # the caller's module is not changed (copied)
    assert r.module is not m and r.module.instruction_count == r.passes[-1].instructions_after
    p = r.passes[0]
    assert (p.index, p.path) == (1, "pre-spmd-partitioner/call-inliner")
    assert p.seconds >= 0 and p.instructions_before == 24
    assert sum(p.changed for p in r.passes) == r.to_json()["summary"]["passes_changed"]
    doc = r.to_json()
    assert validate(doc) == [] and doc["status"] == "ok" and doc["input"] == "jit_fn"
    assert hlorun.compile(S3).to_json()["input"] == str(S3)
    assert "kernels" not in doc
    assert validate(hlorun.compile(S3, explain="gemm.*").to_json()) == []
    assert "ok" in repr(r) and "jit_fn" in repr(r)


class _Raises(Pass):
    name = "test-api-raises"

    def run(self, module) -> bool:
        dot = next(i for i in module.instructions() if i.opcode == "dot")
        raise PassError("cannot handle this dot", instruction=dot.name)


def test_pass_failure_is_recorded_and_raised(tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, _Raises.name, "tests.api.test_api:_Raises")
    p = tmp_path / "p.yaml"
    p.write_text("name: failing\nsteps: [dce, test-api-raises, cse]\n")
    r = hlorun.compile(S3, str(p))
    assert r.status == "pass-failure"
    (f,) = r.failures
    assert (f.index, f.name, f.instruction) == (2, "test-api-raises", "dot_general.1")
    assert [e.name for e in r.passes] == ["dce", "test-api-raises"]
    with pytest.raises(hlorun.PassFailure, match="cannot handle this dot"):
        r.raise_for_status()


# -- errors ---------------------------------------------------------------------------------

def test_errors_of_options_and_pipelines():
    with pytest.raises(hlorun.PipelineError, match="unknown pipeline 'gpu-cuad'.*gpu-cuda"):
        hlorun.compile(S3, "gpu-cuad")
    with pytest.raises(hlorun.UsageError, match="not-a-pass.*matches no pass"):
        hlorun.compile(S3, disable_passes="not-a-pass")
    with pytest.raises(hlorun.UsageError, match="diffs"):
        hlorun.compile(S3, diffs="sometimes")
    with pytest.raises(TypeError, match="did you mean disable_passes"):
        hlorun.compile(S3, disable_pases="cse")
    assert issubclass(hlorun.PipelineError, hlorun.UsageError)
    assert hlorun.HloParseError is hlorun.HloSyntaxError


# -- notebook -------------------------------------------------------------------------------

def test_repr_html_renders_a_notebook_view():
    from html.parser import HTMLParser
    r = hlorun.compile(S0_CONSUMER, "gpu-rocm-41481", disable_passes=NO_TRITON)
    html = r._repr_html_()
    tags: list[str] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)

        def handle_endtag(self, tag):
            assert tags and tags[-1] == tag, (tag, tags[-3:])
            tags.pop()
    P().feed(html)
    assert tags == []  # well nested
    assert "VIOLATION" in html and "reshape-is-bitcast" in html and "cublas-gemm-rewriter" in html
    assert html.count("<tr>") >= len(r.passes)
    assert "<script" not in html


def test_jax_is_imported_only_for_jax_objects():
    """``import hlorun`` loads nothing; load/compile of files and text never import JAX."""
    import subprocess
    import sys
    code = ("import sys, hlorun\n"
            "assert [m for m in sys.modules if m.startswith('hlorun.')] == [], sys.modules\n"
            f"r = hlorun.compile(hlorun.load({str(S3)!r}))\n"
            "assert r.ok and 'jax' not in sys.modules and 'jaxlib' not in sys.modules\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(TESTDATA.parent), timeout=300)
    assert p.returncode == 0, p.stderr
