"""XLA's ``pattern_matcher`` (``m::``) expressions as they appear in
``GmockMatch(...)`` assertions of XLA's pass tests, interpreted against our
IR: ``m::GetTupleElement(m::CustomCall({"__cublas$lt$matmul"}), 0)
.WithShape(F32, {16, 16})`` and friends.

Supported: ``m::Op()``, ``m::Parameter([n])``, ``m::Constant()``,
``m::CustomCall({targets...}[, operands...])`` and every opcode pattern
``m::Xxx(operands...)`` (``GetTupleElement`` takes the tuple index last),
with ``.WithShape(TYPE, {dims})``, ``.WithOneUser()`` and
``.WithOperand(i, pattern)``.  Unknown syntax raises ``ValueError`` (the
harness then skips the case with the reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..ir.module import Instruction

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<id>[A-Za-z_][\w:]*)|(?P<p>[(){},.]))')


def _camel_to_opcode(name: str) -> str:
    special = {"GetTupleElement": "get-tuple-element", "CustomCall": "custom-call",
               "DynamicSlice": "dynamic-slice", "DynamicUpdateSlice": "dynamic-update-slice",
               "AllReduce": "all-reduce", "AllGather": "all-gather", "BitcastConvert": "bitcast-convert"}
    if name in special:
        return special[name]
    return re.sub(r"(?<!^)([A-Z])", r"-\1", name).lower()


@dataclass
class Pat:
    opcode: str | None                     # None: any op
    operands: list["Pat"] | None = None    # None: any operands
    targets: tuple[str, ...] = ()
    index: int | None = None               # parameter number / tuple index
    shape: tuple[str, tuple[int, ...]] | None = None
    one_user: bool = False
    operand_at: list[tuple[int, "Pat"]] = field(default_factory=list)

    def why_not(self, instr: Instruction, path: str = "root") -> str | None:
        if self.opcode is not None and instr.opcode != self.opcode:
            return f"{path}: expected {self.opcode}, got {instr.opcode} {instr.name}"
        if self.targets and instr.custom_call_target not in self.targets:
            return f"{path}: custom call target {instr.custom_call_target} not in {list(self.targets)}"
        if self.index is not None:
            got = instr.parameter_number if self.opcode == "parameter" else instr.tuple_index
            if got != self.index:
                return f"{path}: index {got}, expected {self.index}"
        if self.shape is not None:
            t, dims = self.shape
            if not instr.shape.is_array or instr.shape.element_type != t or instr.shape.dimensions != dims:
                return f"{path}: shape {instr.shape}, expected {t}{list(dims)}"
        if self.one_user and instr.user_count != 1:
            return f"{path}: {instr.name} has {instr.user_count} users"
        if self.operands is not None:
            if len(instr.operands) != len(self.operands):
                return f"{path}: {len(instr.operands)} operands, expected {len(self.operands)}"
            for i, (p, o) in enumerate(zip(self.operands, instr.operands)):
                why = p.why_not(o, f"{path}.operand({i})")
                if why:
                    return why
        for i, p in self.operand_at:
            if i >= len(instr.operands):
                return f"{path}: no operand {i}"
            why = p.why_not(instr.operands[i], f"{path}.operand({i})")
            if why:
                return why
        return None


class _Parser:
    def __init__(self, text: str, names: dict[str, str]):
        self.toks: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"cannot read matcher at: {text[pos:pos + 30]!r}")
            kind = m.lastgroup
            self.toks.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.names = names

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ValueError(f"expected {value!r}, got {tok}")
        self.i += 1
        return tok

    def pattern(self) -> Pat:
        kind, name = self.take()
        if kind != "id" or not name.startswith("m::"):
            raise ValueError(f"expected m::..., got {name}")
        op = name[3:]
        self.take("(")
        args = self._args()
        pat = self._build(op, args)
        while self.peek() == ("p", "."):
            self.take(".")
            _, meth = self.take()
            self.take("(")
            margs = self._args()
            if meth == "WithShape":
                t = margs[0].lower()
                pat.shape = (t, tuple(margs[1]))
            elif meth == "WithOneUser":
                pat.one_user = True
            elif meth == "WithOperand":
                pat.operand_at.append((margs[0], margs[1]))
            else:
                raise ValueError(f"unsupported matcher method .{meth}()")
        return pat

    def _args(self) -> list[Any]:
        args: list[Any] = []
        while self.peek() != ("p", ")"):
            args.append(self._value())
            if self.peek() == ("p", ","):
                self.take(",")
        self.take(")")
        return args

    def _value(self) -> Any:
        kind, v = self.peek()  # type: ignore[misc]
        if kind == "id" and v.startswith("m::"):
            return self.pattern()
        if kind == "p" and v == "{":
            self.take("{")
            items = []
            while self.peek() != ("p", "}"):
                items.append(self._value())
                if self.peek() == ("p", ","):
                    self.take(",")
            self.take("}")
            return items
        self.take()
        if kind == "str":
            return v[1:-1].replace('\\"', '"')
        if kind == "num":
            return int(v)
        if kind == "id" and self.peek() == ("p", "("):  # helper call, e.g. CustomCallTarget()
            self.take("(")
            self._args()
            if v not in self.names:
                raise ValueError(f"unknown helper {v}()")
            return self.names[v]
        return v

    def _build(self, op: str, args: list[Any]) -> Pat:
        if op == "Op":
            return Pat(None)
        if op == "Parameter":
            return Pat("parameter", None, index=args[0] if args else None)
        if op == "Constant":
            return Pat("constant")
        if op == "CustomCall":
            targets: tuple[str, ...] = ()
            rest = args
            if args and isinstance(args[0], list):
                targets = tuple(args[0])
                rest = args[1:]
            return Pat("custom-call", list(rest) if rest else None, targets=targets)
        if op == "GetTupleElement":
            index = args[1] if len(args) > 1 else None
            return Pat("get-tuple-element", [args[0]] if args else None, index=index)
        return Pat(_camel_to_opcode(op), list(args) if args else None)


def parse_matcher(text: str, helpers: dict[str, str] | None = None) -> Pat:
    """Parse an ``m::`` expression; ``helpers`` maps helper calls such as
    ``CustomCallTarget`` to their string values."""
    p = _Parser(text, helpers or {})
    pat = p.pattern()
    if p.peek() is not None:
        raise ValueError(f"trailing text after matcher: {p.toks[p.i:]}")
    return pat
