"""XLA's autotuning key (hlorun/autotune/fingerprint.py): FarmHash
Fingerprint128 of XLA's canonical print of an instruction.  Checked against
XLA itself: every fusion of the module XLA autotuned (the pass-by-pass
dumps' ``before_config_assignment`` modules) has its fingerprint in that
run's autotune_results.textproto; and ``--autotune-results`` binds entries
to hlorun's GEMMs by fingerprint where hlorun's GEMM is XLA's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.text.parser import load_module

from ..conftest import SHARED

pytest.importorskip("farmhash")

from hlorun.autotune.fingerprint import fingerprint_text, xla_fingerprint  # noqa: E402


def _keys(path: Path) -> set[str]:
    return set(re.findall(r'hlo_fingerprint: "([0-9a-f]{32})"', path.read_text()))


def _pass_dumps():
    root = SHARED / "xla-dumps"
    return [pytest.param(d, id=d.name) for d in sorted(root.glob("*"))
            if any(d.glob("*before_config_assignment.txt"))] if root.is_dir() else []


@pytest.mark.parametrize("d", _pass_dumps())
def test_every_fusion_xla_autotuned_has_xla_s_fingerprint(d):
    module = load_module(next(d.glob("*before_config_assignment.txt")))
    keys = _keys(d / "autotune_results.textproto")
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert fusions
    missing = [i.name for i in fusions if xla_fingerprint(i) not in keys]
    assert not missing, (d.name, missing, fingerprint_text(module.entry.get_instruction(missing[0])))


def test_fingerprint_text_is_xla_s_canonical_print():
    """The pieces XLA's key depends on: no names at the top, bodies with
    tmp_<n> names, sorted backend config keys, essential constants only."""
    d = SHARED / "xla-dumps" / "cnn_fp16"
    if not d.is_dir():
        pytest.skip("no shared dumps")
    module = load_module(next(d.glob("*before_config_assignment.txt")))
    gemm = next(i for i in module.entry.instructions
                if i.opcode == "fusion" and "__triton_gemm" in str(i.attrs.get("backend_config")))
    text = fingerprint_text(gemm)
    head, body = text.split("calls=\n", 1)
    assert not head.startswith("%") and " = " not in head
    assert body.startswith("{\n  tmp_0 = ") and "metadata" not in text
    assert '"fusion_backend_config":{"kind":"__triton_gemm"}' in text
    # reordering the backend config keys does not change the key
    cfg = json.loads(gemm.attrs["backend_config"])
    before = xla_fingerprint(gemm)
    gemm.attrs["backend_config"] = json.dumps(dict(reversed(list(cfg.items()))))
    assert xla_fingerprint(gemm) == before
    gemm.attrs["backend_config"] = json.dumps({**cfg, "operation_queue_id": "1"})
    assert xla_fingerprint(gemm) != before


def _replay(tmp_path: Path, d: Path) -> dict:
    info = json.loads((d / "info.json").read_text()) if (d / "info.json").is_file() else {}
    flags = " ".join(f for f in info.get("xla_flags", "").split() if "dump" not in f)
    out = tmp_path / "out.hlo"
    r = CliRunner().invoke(cli, ["compile", str(next(d.glob("*before_optimizations.txt*"))),
                                 "--autotune-results", str(d / "autotune_results.textproto"),
                                 "-o", str(out), "--format", "json", "--xla-flags", flags])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("case", ["f16_b0_m2048_n2048_k2048_none", "f32_b0_m64_n50304_k768_none"])
def test_replay_binds_gemm_sweep_entries_by_fingerprint(tmp_path, case):
    d = SHARED / "xla-dumps" / "gemm_sweep" / case
    if not d.is_dir():
        pytest.skip("no gemm_sweep dumps")
    (dec,) = _replay(tmp_path, d)["autotune"]
    assert dec["source"] == "xla-results", dec
    bound = [n.rsplit(" ", 1)[1] for n in dec["notes"]
             if n.startswith("XLA's entry bound by hlo_fingerprint ")]
    assert bound and bound[0] in _keys(d / "autotune_results.textproto"), dec["notes"]
