"""Buffer analysis: logical values, aliasing, live ranges and XLA-faithful
buffer assignment (allocations, offsets, reuse), plus the text XLA dumps
for them.

    from hlorun.buffers import assign_buffers, AssignOptions
    asg = assign_buffers(module, AssignOptions(platform="cuda"))
    asg.allocations            # [BufferAllocation]
    asg.slices_at(instr, ())   # [(allocation, offset, size)]

Modules: values (dataflow), alias_rules (must/may alias, custom-call
policy), alias (buffers), liverange (schedule, live ranges), heap (heap
simulator), assign (the assigner), allocation (results), dump (XLA's text
formats), timeline (report data and SVG), checker (``buffer-aliasing``).
"""

from .alias_rules import AliasRules
from .targets import TargetPolicy, validate_targets
from .allocation import BufferAllocation, BufferAssignment
from .assign import AssignOptions, BufferAssigner, assign_buffers

__all__ = ["AliasRules", "AssignOptions", "BufferAllocation", "BufferAssigner",
           "BufferAssignment", "TargetPolicy", "assign_buffers", "validate_targets"]
