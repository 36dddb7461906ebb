"""The protobuf text reader and XLA's autotuning files, on every shared dump."""

from __future__ import annotations

import pytest

from hlorun.autotune.textproto import TextprotoError, parse
from hlorun.autotune.xla_logs import read_logs, read_results

from ..conftest import shared_path


def test_scalars_and_nesting():
    m = parse('a: 1 b: -2.5 c: "x\\ty" "z" d: TRITON e { f: true g < h: 0x10 > } e { } l: [1, 2] # c\n')
    assert m.one("a") == 1 and m.one("b") == -2.5 and m.one("c") == "x\tyz" and m.one("d") == "TRITON"
    assert len(m.all("e")) == 2 and m.path("e.g.h") is None   # path follows the last e
    assert m.all("e")[0].path("g.h") == 16 and m.all("e")[0].one("f") is True
    assert m.all("l") == [1, 2]


def test_octal_escapes_and_errors():
    assert parse(r'm: "\101\x42"').one("m") == "AB"
    with pytest.raises(TextprotoError) as e:
        parse("a {\n  b: 1\n", "f.textproto")
    assert "missing '}'" in str(e.value)
    with pytest.raises(TextprotoError) as e:
        parse("a: 1\n  b 2\n", "f.textproto")
    assert e.value.line == 2 and "expected ':'" in e.value.render()


def test_every_shared_results_file_reads():
    root = shared_path("xla-dumps")
    files = sorted(root.rglob("autotune_results.textproto")) + sorted(root.rglob("*.autotune_results.pbtxt"))
    assert len(files) >= 33
    total = gemm = 0
    for f in files:
        entries = read_results(f)
        total += len(entries)
        gemm += sum(e.config.is_gemm for e in entries)
        for e in entries:
            assert e.config.backend and (e.fingerprint or e.hlo is not None or not entries)
    assert total >= 150 and gemm >= 30


def test_sweep_winner_entry():
    f = shared_path("xla-dumps/gemm_sweep/f16_b0_m1024_n1024_k1024_none/autotune_results.textproto")
    tri = [e for e in read_results(f) if e.config.backend == "triton"]
    assert len(tri) == 1
    c = tri[0].config.triton
    assert (c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps, c.is_tma_allowed) == (128, 64, 128, 3, 4, True)
    assert tri[0].fingerprint == "29b4336b110e76d44453a2b62cca34e9"
    f = shared_path("xla-dumps/dot_general_gqa_cublaslt/autotune_results.textproto")
    lt = [e for e in read_results(f) if e.config.is_gemm]
    assert [e.config.xla_backend for e in lt] == ["CUBLASLT"] and lt[0].config.workspace == 33554432


def test_every_sweep_log_reads():
    root = shared_path("xla-dumps/gemm_sweep")
    n = 0
    for f in sorted(root.rglob("autotune_logs.textproto")):
        profs = read_logs(f)
        assert profs
        n += sum(len(p.profiles) for p in profs)
    assert n > 500
    log = read_logs(root / "f16_b0_m1024_n1024_k1024_none/autotune_logs.textproto")[0]
    assert len(log.measured("triton")) == 17 and len(log.measured("cublaslt")) == 8
    assert "requested 294936, available: 232448" in log.failed()[1].failure
