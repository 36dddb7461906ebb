"""Fingerprints change whenever the printed module changes."""

from __future__ import annotations

from hlorun.text.parser import load_module
from hlorun.text.fingerprint import fingerprint
from hlorun.ir.module import Instruction
from hlorun.text.printer import print_module

from .conftest import shared_path

F = ("xla-dumps", "cnn_fp16",
     "module_14585.jit_model.0011.simplification.after_reshape-mover.before_constant_folding.txt")


def edits():
    def rename(m):
        m.entry.root.name = m.entry.root.name + "_x"

    def attr(m):
        i = next(i for i in m.entry.instructions if i.opcode == "broadcast")
        i.attrs["dimensions"] = "{}"

    def metadata(m):
        i = next(i for i in m.entry.instructions if "metadata" in i.attrs)
        i.attrs["metadata"] = '{op_name="changed"}'

    def shape(m):
        p = m.entry.parameters[0]
        p.shape = p.shape.without_layout()

    def swap_operands(m):
        i = next(i for i in m.entry.instructions if i.opcode == "add" and i.operands[0] is not i.operands[1])
        i.replace_operands(list(reversed(i.operands)))

    def new_root(m):
        r = m.entry.root
        n = Instruction("copy", r.shape, [r])
        m.entry.add_instruction(n, "copy")
        m.entry.root = n

    def header(m):
        m.header_attrs["entry_computation_layout"] = m.header_attrs["entry_computation_layout"].replace("{0}", "{0}", 1) + " "

    return [rename, attr, metadata, shape, swap_operands, new_root, header]


def test_fingerprint_is_stable_and_sees_every_printed_change():
    base = load_module(shared_path(*F))
    fp0 = fingerprint(base)
    assert fingerprint(base) == fp0
    # (identity-based parts: fingerprints compare states of one module object)
    for edit in edits():
        m = load_module(shared_path(*F))
        before = print_module(m)
        edit(m)
        assert print_module(m) != before, edit.__name__
        assert fingerprint(m) != fp0, edit.__name__
