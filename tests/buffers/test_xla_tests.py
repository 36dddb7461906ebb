"""XLA's own unit tests of buffer assignment and NVPTX alias rules, on the
modules the corpus extracted from them (``shared/corpus/xla/passes``); the
expectations are the tests' EXPECT lines (cited)."""

from __future__ import annotations

from hlorun.buffers import AliasRules, AssignOptions, assign_buffers
from hlorun.text.parser import load_module
from tests.conftest import shared_path


def _mod(test_dir: str, name: str):
    return load_module(shared_path("corpus", "xla", "passes", test_dir, f"{name}.hlo"))


def _alloc(asg, m, name):
    (a, _off, _size), = asg.slices_at(m.entry.get_instruction(name))
    return a


def test_aliased_param_can_be_reused():
    """buffer_assignment_test.cc AliasedParamCanBeReused: "Everything use
    one buffer" (p0 donated to neg2; neg1 reuses p0 after its last use)."""
    m = _mod("buffer_assignment_test", "BufferAssignmentTest.AliasedParamCanBeReused")
    asg = assign_buffers(m, AssignOptions(platform="cpu", alignment=1, colorer="memory-space"))
    p, n1, n2 = (_alloc(asg, m, n) for n in ("p0", "neg1", "neg2"))
    assert p.index == n1.index == n2.index
    assert p.is_entry_parameter


def test_input_output_allocations_keep_their_color():
    """buffer_assignment_test.cc CanUseAllocationDoesNotMixInputOutputColors:
    the S(1) donated parameter's allocation keeps color 1; the S(0) temp
    neg1 does not go into it; neg2 (aliased output) does."""
    m = _mod("buffer_assignment_test", "BufferAssignmentTest.CanUseAllocationDoesNotMixInputOutputColors")
    asg = assign_buffers(m, AssignOptions(platform="cpu", alignment=1, colorer="memory-space"))
    p, n1, n2 = (_alloc(asg, m, n) for n in ("p0", "neg1", "neg2"))
    assert p.is_entry_parameter and p.param_aliased and p.color == 1
    assert asg.dataflow.unique_value(m.entry.get_instruction("neg1")).color == 0
    assert p.index != n1.index
    assert p.index == n2.index


def _may_alias(name: str):
    m = _mod("nvptx_alias_info_test", f"NVPTXAliasInfoTest.{name}")
    mm = m.entry.root
    rules = AliasRules("cuda")
    return lambda k, out: rules.may_alias(mm.operands[k], (), mm, out)


def test_bias_matmul_buffer_can_be_shared():
    """nvptx_alias_info_test.cc BufferCanBeSharedForBiasMatmul (lines 75-77)."""
    may = _may_alias("BufferCanBeSharedForBiasMatmul")
    assert may(0, (0,)) is False and may(1, (0,)) is False and may(2, (0,)) is True


def test_matmul_workspace_buffer_cannot_be_shared():
    """MatmulWorkspaceBufferCannotBeSharedForBiasMatmul (lines 98-100)."""
    may = _may_alias("MatmulWorkspaceBufferCannotBeSharedForBiasMatmul")
    assert may(2, (0,)) is True and may(2, (1,)) is False


def test_duplicate_operand_buffer_cannot_be_shared():
    """DuplicateOperandBufferCannotBeSharedForBiasMatmul (lines 117-119)."""
    may = _may_alias("DuplicateOperandBufferCannotBeSharedForBiasMatmul")
    assert may(0, (0,)) is False and may(1, (0,)) is False and may(2, (0,)) is False
