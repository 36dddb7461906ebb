"""Multi-output fusion on a real XLA:GPU input (testdata/xla-dumps/
dropout_mlp_train_bf16, JAX 0.11.2): the threefry key chains of dropout give
multi-output producers that are themselves merged into sibling fusions.
Merging a fusion whose root is a tuple once cloned that tuple into the new
body with no users, and the verifier stopped the pipeline after
multi_output_fusion ("Non-root instruction tuple.51 in fusion.345 must have
users")."""

from __future__ import annotations

from pathlib import Path

import hlorun

DUMP = Path(__file__).resolve().parents[2] / "testdata" / "xla-dumps" / "dropout_mlp_train_bf16"


def test_dropout_training_step_compiles_clean():
    src = next(DUMP.glob("*.before_optimizations.txt*"))
    result = hlorun.compile(hlorun.load(src), pipeline="gpu-cuda")
    assert result.ok, [str(v) for v in result.violations][:3]
    fusions = [i for c in result.module.computations for i in c.instructions
               if i.opcode == "fusion" and i.fused_computation.root.opcode == "tuple"]
    assert fusions, "the step has multi-output fusions"
    for f in fusions:
        body = f.fused_computation
        dead = [i.name for i in body.instructions if i is not body.root and not i.users]
        assert not dead, f"{f.name}: unused instructions {dead}"
