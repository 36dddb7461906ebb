"""CompileOptions: the command line and the API mean the same thing.  A
compile command line parses (with compile's own flags) into exactly the
options the keywords give, and ``to_argv`` recreates them."""

from __future__ import annotations

import pytest

import hlorun
from hlorun.cli.compile_options import parse_compile_argv
from hlorun.options import FLAT, XLA_FLAG_FIELDS

from ..conftest import TESTDATA

S0 = str(TESTDATA / "s0" / "jit_dot_general_consumer.hlo")

CASES = [
    dict(pipeline="gpu-rocm-41481", disable_passes=("cse", "dce"), pass_limit=7),
    dict(enable_passes_only=("fusion",), verify_each=False, check_changed=True, keep_going=True),
    dict(force_backend=("hipblaslt", "dot.1=cublaslt:3"), autotune="noisy", contention="high",
         sampling="fair", flip_seeds=5, seed=3, force_backend_strict=True),
    dict(check_numerics="final", rtol=1e-3, atol=1e-4, numerics_inputs=("p=a.npy",),
         max_bytes="1G"),
    dict(platform="rocm", device="MI300X", compute_capability="gfx942"),
    dict(dump_to="dumps", dump_pass_re="fusion", repro_dir="repro"),
]


@pytest.mark.parametrize("kw", CASES)
def test_command_line_and_keywords_agree(kw):
    opts = hlorun.CompileOptions.from_kwargs(lineage=False, diffs="changed", **kw)
    parsed = parse_compile_argv([S0] + opts.to_argv())
    assert parsed.file == S0
    assert parsed.options == opts


def test_xla_spellings_map_onto_the_same_fields():
    a = parse_compile_argv([S0, "--xla_disable_hlo_passes=cse,dce", "--disable-passes", "algsimp",
                            "--xla_dump_to", "d", "--xla_dump_hlo_pass_re", "cse"]).options
    b = parse_compile_argv([S0, "--xla-flags", "--xla_disable_hlo_passes=cse,dce "
                            "--xla_dump_to=d --xla_dump_hlo_pass_re=cse",
                            "--disable-passes", "algsimp"]).options
    c = hlorun.CompileOptions.from_kwargs(disable_passes="algsimp",
                                          xla_disable_hlo_passes="cse,dce", xla_dump_to="d",
                                          xla_dump_hlo_pass_re="cse", lineage=False,
                                          diffs="changed")
    assert a.selection.disable_passes == ("algsimp", "cse", "dce")
    assert a == b == c
    assert set(XLA_FLAG_FIELDS) <= {k for k in XLA_FLAG_FIELDS if FLAT.get(k) is None}


def test_explain_turns_lineage_on_and_flags_are_validated():
    assert parse_compile_argv([S0, "--explain"]).options.diagnostics.lineage
    assert not parse_compile_argv([S0]).options.diagnostics.lineage
    with pytest.raises(hlorun.UsageError, match="needs --dump-to"):
        parse_compile_argv([S0, "--dump-pass-re", "x"])
    with pytest.raises(hlorun.UsageError, match="bad regex"):
        parse_compile_argv([S0, "--diff-filter", "("])
