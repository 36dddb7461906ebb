"""constant-folding (XLA's HloConstantFolding) inside the compiler: it
evaluates with hlorun's evaluator but must not retune the process's malloc
the way a numerics run does (a compile's peak memory is a target)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import hlorun.evaluate.allocator as alloc
from hlorun.passes import pass_class
from hlorun.text.parser import parse_module
m = parse_module('''HloModule var
ENTRY %e (s: f32[64]) -> f32[64] {
  %n = f32[] constant(16384)
  %zero = s32[] constant(0)
  %ddof = f32[] convert(%zero)
  %dof = f32[] subtract(%n, %ddof)
  %b = f32[64]{0} broadcast(%dof), dimensions={}
  %s = f32[64]{0} parameter(0)
  ROOT %d = f32[64]{0} divide(%s, %b)
}
''')
assert pass_class("constant-folding")().run(m)
ops = sorted(i.opcode for i in m.entry.instructions)
assert "convert" not in ops and "subtract" not in ops, ops
print(alloc._done)
"""


def test_folding_leaves_malloc_alone():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"
