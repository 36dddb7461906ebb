"""Test-only passes and a checker, registered only inside tests (fixture
``testkit``), to drive the pipeline machinery on real modules:

* ``test-negate-root``: wraps the entry root in a negate (a real change);
* ``no-negate`` checker: every negate is a finding;
* ``test-fail``: raises PassError on the entry root;
* ``test-crash``: raises ZeroDivisionError (a bug in a pass);
* ``test-silent``: changes the module but reports changed=False;
* ``test-noop-liar``: changes nothing but reports changed=True.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hlorun.ir.module import Instruction
from hlorun.passes.base import Pass
from hlorun.verifier.checkers import Checker


@dataclass(frozen=True)
class NegateRoot(Pass):
    """Wrap the entry root in a negate."""

    name = "test-negate-root"
    times: int = 1

    def run(self, module) -> bool:
        comp = module.entry
        for _ in range(self.times):
            root = comp.root
            neg = Instruction("negate", root.shape, [root])
            comp.add_instruction(neg, "negate")
            comp.root = neg
            self.remark(neg, "wrapped the root", kind="applied")
        return True


@dataclass(frozen=True)
class Fail(Pass):
    """Raise a PassError on the entry root."""

    name = "test-fail"

    def run(self, module) -> bool:
        self.fail("cannot handle this root", module.entry.root)
        return False


@dataclass(frozen=True)
class Crash(Pass):
    """A pass with a bug."""

    name = "test-crash"

    def run(self, module) -> bool:
        return 1 // 0 == 0


@dataclass(frozen=True)
class Silent(Pass):
    """Rename the root but claim nothing changed."""

    name = "test-silent"

    def run(self, module) -> bool:
        module.entry.root.attrs["metadata"] = '{op_name="x"}'
        comp = module.entry
        root = comp.root
        comp.root = Instruction("negate", root.shape, [root])
        comp.add_instruction(comp.root, "silent")
        return False


@dataclass(frozen=True)
class NoopLiar(Pass):
    """Change nothing, claim a change."""

    name = "test-noop-liar"

    def run(self, module) -> bool:
        return True


class NoNegate(Checker):
    """Every negate is a violation."""

    name = "no-negate"

    def check(self, module):
        return [self.diag(module, i, "negate is not allowed here")
                for c in module.computations for i in c._instructions if i.opcode == "negate"]


PASSES = {
    "test-crash": "tests.pipeline_testkit:Crash",
    "test-fail": "tests.pipeline_testkit:Fail",
    "test-negate-root": "tests.pipeline_testkit:NegateRoot",
    "test-noop-liar": "tests.pipeline_testkit:NoopLiar",
    "test-silent": "tests.pipeline_testkit:Silent",
}


@pytest.fixture
def testkit(monkeypatch):
    """Register the test passes and checker for one test."""
    from hlorun import passes
    from hlorun.verifier import checkers as verify
    for k, v in PASSES.items():
        monkeypatch.setitem(passes.REGISTRY, k, v)
    monkeypatch.setitem(verify.CHECKERS, "no-negate", "tests.pipeline_testkit:NoNegate")
    yield
