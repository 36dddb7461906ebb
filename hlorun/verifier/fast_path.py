"""The incremental verifier's fast path for one instruction:
:func:`instruction_findings` is ``list(_instruction(...))`` of
:mod:`hlorun.verifier.module`, without running the rules' generator for
the usual instruction whose content already passed (the rules' memo)."""

from __future__ import annotations

from typing import Any

from ..ir.module import Computation, Instruction
from ..ir.opcode import OPCODES, VARIADIC
from .module import (_CALLERS, _NO_MEMO, _START_UPDATE, Context, Finding, _instruction,
                     _is_async, _memo_key, _unbounded, reads_users)


#: Opcodes the fast path of :func:`instruction_findings` may take: known,
#: memoizable, not asynchronous or pair-forming, not a caller whose thread
#: names are checked.
_FAST: dict[str, bool] = {}


def _fast_op(op: str) -> bool:
    got = _FAST.get(op)
    if got is None:
        got = _FAST[op] = (op in OPCODES and op not in _NO_MEMO and op not in _CALLERS
                           and op not in ("async-start", "async-update", "async-done")
                           and not reads_users(op))
    return got


def instruction_findings(instr: Instruction, comp: Computation, opts: Any, ctx: Context,
                         memo: dict) -> list[Finding]:
    """``list(_instruction(instr, comp, opts, ctx, memo))``, without running
    the generator for the usual instruction: linked both ways to operands of
    its computation, its content (``_memo_key``) seen to pass, nothing that
    the other rules read (asynchronous operands, thread names, ``origin``)."""
    op = instr.opcode
    fast = _FAST.get(op)
    if fast is None:
        fast = _fast_op(op)
    if fast and not opts.verify_call_nested_computation_thread_name:
        ops = instr.operands
        su_get = _START_UPDATE.get
        for o in ops:
            if o.parent is not comp or instr not in o._users:
                break
            su = su_get(o.opcode)
            if su is None:
                su = _START_UPDATE[o.opcode] = _is_async(o.opcode, ("-start", "-update"))
            if su:
                break
        else:
            for p in instr.control_predecessors:
                if p.parent is not comp:
                    break
            else:
                arity = OPCODES[op]
                s = instr.shape
                if (arity == VARIADIC or len(ops) == arity) and (
                        (s.dynamic is None and s.tuple_shapes is None)
                        or opts.allow_unbounded_dynamism or not _unbounded(s)) \
                        and "origin" not in instr.attrs:
                    key = _memo_key(instr, ctx)
                    if key is not None and key in memo:
                        return []
    return list(_instruction(instr, comp, opts, ctx, memo))


__all__ = ["instruction_findings"]
