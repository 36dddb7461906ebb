"""priority-fusion's IR edits (hlorun/passes/priority_fusion/fuse.py): the
in-place renumbering of a fused body's later parameters
(``_renumber_after``) gives the module, names and remarks that XLA's
RemoveParameter (``hlorun.ir.edit.remove_parameter``: a new ``param_N``
per later parameter) gives, on a real model; parameters a tracker has
scanned still go through ``remove_parameter``."""

from __future__ import annotations

from pathlib import Path

from hlorun.ir import edit
from hlorun.ir.journal import TrackedInstruction, adopt
from hlorun.ir.module import Computation, Instruction, Module
from hlorun.ir.shape import Shape
from hlorun.passes.priority_fusion import fuse as F

from .test_priority_fusion_incremental import fuse, pre_fusion

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "testdata" / "transformer" / "jax_4layer_train_step.hlo.gz"


def test_renumbering_in_place_matches_remove_parameter(monkeypatch):
    calls = {"in place": 0, "remove_parameter": 0}
    renumber = F._renumber_after

    def counted(body, param, later):
        calls["in place"] += 1
        renumber(body, param, later)
    monkeypatch.setattr(F, "_renumber_after", counted)
    fast = fuse(pre_fusion(MODEL), False)
    assert calls["in place"] > 1000

    def xla(body, param, later):  # the reference: one new parameter each
        calls["remove_parameter"] += 1
        edit.remove_parameter(body, param)
    monkeypatch.setattr(F, "_renumber_after", xla)
    slow = fuse(pre_fusion(MODEL), False)
    assert calls["remove_parameter"] == calls["in place"]
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]  # same text: names, parameter numbers, order
    assert fast[2] == slow[2]  # same remarks


def _body_with_params(n: int) -> tuple[Module, Computation, list[Instruction]]:
    module = Module("m")
    body = Computation("fused_computation")
    module.add_computation(body)
    s = Shape.array("f32", (4,))
    params = []
    for i in range(n):
        p = Instruction("parameter", s)
        p.parameter_number = i
        body.add_instruction(p, f"param_{i}")
        params.append(p)
    add = body.add_instruction(Instruction("add", s, [params[1], params[2]]))
    body.root = body.add_instruction(Instruction("multiply", s, [add, params[3]]))
    return module, body, params


def test_in_place_keeps_order_names_and_users():
    _, body, params = _body_with_params(4)
    assert body.parameters == params
    F._renumber_after(body, params[0], params[1:])
    assert body.parameters == params[1:]
    assert [p.parameter_number for p in body.parameters] == [0, 1, 2]
    assert [p.name for p in body.parameters] == ["param_0.1", "param_1.1", "param_2.1"]
    # the renumbered parameters come last, as new ones would
    assert body.instructions[-3:] == params[1:]
    assert [u.name for u in params[1].users] == ["add"]


def test_scanned_parameters_are_replaced():
    module, body, params = _body_with_params(4)
    fusion_operands = [Instruction("parameter", p.shape) for p in params]
    fusion = Instruction("fusion", params[0].shape, fusion_operands, "fusion",
                         {"kind": "kLoop", "calls": body})
    adopt([params[3]])
    assert params[3].__class__ is TrackedInstruction
    F._remove_parameter(fusion, body, 0)
    # one scanned parameter: every later one is replaced by a new instruction
    assert not set(body.parameters) & set(params)
    assert [p.name for p in body.parameters] == ["param_0.1", "param_1.1", "param_2.1"]
    assert fusion.operands == fusion_operands[1:]
