"""HLO text -> IR, with located errors.

The grammar is ``hlorun/grammars/hlo.lark`` (Lark, LALR(1)).  Lark's LALR tables and
the rule callbacks below (a tree-less transformer: no parse tree is built) do
the parsing; the tokens come from a small contextual scanner built from the
grammar's own terminal definitions: for each LALR state it compiles one regex
of the terminals that state accepts (priority order, whitespace and comments
skipped in the same match), and feeds plain tokens straight into Lark's
parser state.  That keeps the per-token cost low, which is where parse time
goes.

Semantic checks follow XLA's parser: names resolve in the current
computation only and must be defined before use, computations before they are
called, attributes are checked against ``hlorun.ir.attrs.SCHEMA``, literals
against their shape.  Every error is an :class:`HloParseError` with line and
column.
"""

from __future__ import annotations

import gc
import os
import re
from functools import lru_cache
from typing import Any

from lark import Lark, Transformer

from ..ir import attrs as A
from ..ir.literal import Literal, LiteralError, validate_literal
from ..ir.module import Computation, Instruction, Module
from ..ir.opcode import OPCODES, VARIADIC, split_async_sugar
from ..ir.shape import Shape, ShapeSyntaxError, compatible, intern, parse_array_shape
from ..errors import HloParseError, offset_to_line_col

#: Most operands one instruction may have.  XLA sets no limit, but real
#: modules stay far below it (the widest while/tuple in the corpus has a few
#: thousand); beyond it a hostile or broken file gets a clear error instead
#: of minutes of parsing and gigabytes of IR.
MAX_OPERANDS = 200_000

MAX_NESTING = 64  # XLA's default max_recursion_depth is 256 for deep texts;
# nested operands/shapes/literals beyond what the grammar admits are rejected.

_ASYNC_OPS = ("async-start", "async-update", "async-done")


#: Opcodes whose shape XLA's parser computes from the operands, ignoring
#: the shape written in the text (HloInstruction::CreateSend & co).
_OWN_SHAPE = frozenset({"send", "send-done", "recv-done", "replica-id", "partition-id",
                        "after-all", "add-dependency"})


def _own_shape(opcode: str, operands: list, declared: Shape) -> Shape:
    if opcode == "send" and operands:
        return Shape.tuple([operands[0].shape, Shape.array("u32", []), Shape.token()])
    if opcode in ("send-done", "after-all"):
        return Shape.token()
    if opcode == "recv-done" and operands and operands[0].shape.is_tuple \
            and operands[0].shape.tuple_shapes:
        return Shape.tuple([operands[0].shape.tuple_shapes[0], Shape.token()])
    if opcode in ("replica-id", "partition-id"):
        return Shape.array("u32", [])
    if opcode == "add-dependency" and operands:
        return operands[0].shape
    return declared


def grammar_bytes() -> bytes:
    """hlo.lark, read from the package (checkout, installed or zipped wheel)
    through importlib.resources."""
    from importlib import resources
    return resources.files("hlorun").joinpath("grammars", "hlo.lark").read_bytes()


class Tok(str):
    """A token: its text, terminal name and start offset (nothing else, so
    making one is cheap)."""

    __slots__ = ("type", "start_pos")


Token = Tok


class _Fail(Exception):
    """Internal: a semantic error at a text offset."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


_TERMINAL_WORDS = {
    "NAME": "name", "PARAM_NAME": "parameter 'name:'", "INSTR_NAME": "instruction ('name =')",
    "OPCODE": "opcode", "CONSTANT": "'constant'", "PARAMETER": "'parameter'",
    "GTE_SUFFIX": "'#index'", "INT": "integer", "STRING": "string",
    "ARRAY_SHAPE": "shape", "FLAT_TUPLE_SHAPE": "tuple shape", "BUFFER_OPEN": "'b('",
    "OPERAND_LIST": "operands", "LITERAL": "literal", "BRACED": "'{...}'",
    "ATTR": "attribute (', key=value')", "ENTRY": "'ENTRY'", "ROOT": "'ROOT'",
    "HLOMODULE": "'HloModule'", "FILE_NAMES": "'FileNames'",
    "FUNCTION_NAMES": "'FunctionNames'", "FILE_LOCATIONS": "'FileLocations'",
    "STACK_FRAMES": "'StackFrames'", "ARROW": "'->'", "LBRACE": "'{'", "RBRACE": "'}'",
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "$END": "end of input",
}


def _describe(terminals) -> str:
    words = sorted({_TERMINAL_WORDS.get(t, t.lower()) for t in terminals
                    if not t.startswith("__IGNORE")})
    words = [w if w != "__anon_0" else "'->'" for w in words]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


# Whitespace and comments, written unambiguously (no nested quantifiers
# over the same characters) so a failing match cannot backtrack
# exponentially.
_SKIP = r"[ \t\r\n]*(?:(?:/\*[^*]*\*+(?:[^/*][^*]*\*+)*/|//[^\n\r]*(?=[\n\r]|\Z))[ \t\r\n]*)*"


class _Scanner:
    """Per-LALR-state master regexes built from the grammar's terminals."""

    def __init__(self, lark: Lark):
        self.terminals = {t.name: t for t in lark.terminals}
        self.states = lark.parser.parser.parser.parse_table.states
        self.skip_only = re.compile(_SKIP)
        self.cache: dict[int, tuple[Any, tuple[str, ...]]] = {}

    def for_state(self, state: int):
        got = self.cache.get(state)
        if got is not None:
            return got
        names = [n for n in self.states[state] if n.isupper() and n in self.terminals]
        order = sorted(names, key=lambda n: (
            -self.terminals[n].priority,
            0 if self.terminals[n].pattern.type == "str" else 1,
            -len(self.terminals[n].pattern.value), n))
        alts = []
        for n in order:
            p = self.terminals[n].pattern
            rx = p.to_regexp()
            if p.type == "str" and re.fullmatch(r"\w+", p.value):
                rx += r"(?![\w.\-])"  # keywords are whole words
            alts.append(f"(?P<{n}>{rx})")
        regex = re.compile(_SKIP + "(?:" + "|".join(alts) + ")" if alts else _SKIP + "(?!)")
        got = (regex, tuple(order) + (("$END",) if "$END" in self.states[state] else ()))
        self.cache[state] = got
        return got


class _Builder(Transformer):
    """Rule callbacks: build the IR while Lark reduces (no parse tree)."""

    def __init__(self):
        super().__init__()
        self.reset("", None)

    def reset(self, text: str, filename: str | None) -> None:
        self.text = text
        self.filename = filename
        self.computations: dict[str, Computation] = {}
        self.comp_order: list[Computation] = []
        self.entry: Computation | None = None
        self.cur: Computation | None = None
        self.names: dict[str, Instruction] = {}
        self.root: Instruction | None = None
        self.last: Instruction | None = None
        self.entry_pending = False
        self.sig = None
        self.comp_tok: Any = None
        self.anon = 0
        self.param_numbers: set[int] = set()
        self.attr_ok: dict[tuple[str, str], bool] = {}
        self.single = False
        self.param_count = 0
        self._last_pos = 0
        self.nest_depth: dict[Instruction, int] = {}
        self._async_users: dict[str, bool] = {}
        self.saw_compact_gte = False

    # -- helpers --------------------------------------------------------------
    def fail(self, message: str, offset: int):
        raise _Fail(message, offset)

    def shape_of(self, tok) -> Shape:
        try:
            return parse_array_shape(str(tok))
        except ShapeSyntaxError as e:
            self.fail(str(e), tok.start_pos + e.offset)

    # -- shapes -------------------------------------------------------------------
    def array_shape(self, c):
        tok = c[0]
        try:
            return parse_array_shape(str(tok))
        except ShapeSyntaxError as e:
            self.fail(str(e), tok.start_pos + e.offset)

    def flat_tuple_shape(self, c):
        tok = c[0]
        return _flat_tuple(str(tok), tok.start_pos, self)

    def tuple_shape(self, c):
        return Shape.tuple([x for x in c if isinstance(x, Shape)])

    def buffer_shape(self, c):
        inner = c[1]
        if not inner.is_array:
            self.fail("buffer shape must wrap an array shape", c[0].start_pos)
        return intern(Shape("buffer", buffer_of=inner))

    # -- operands -------------------------------------------------------------
    def simple_operands(self, c):
        tok = c[0]
        s = str(tok)
        if len(s) > 2 * MAX_OPERANDS and s.count(",") >= MAX_OPERANDS:
            self.fail(f"too many operands ({s.count(',') + 1}); hlorun accepts at most "
                      f"{MAX_OPERANDS} per instruction", tok.start_pos)
        if "[" not in s and "#" not in s and "/*" not in s:
            # Plain names: the common case in XLA dumps.
            names = self.names
            out = []
            for part in s[1:-1].split(","):
                name = part.strip()
                if not name:
                    continue
                instr = names.get(name[1:] if name[0] == "%" else name)
                if instr is None:
                    return self._simple_operands_slow(tok, s)
                out.append(instr)
            return out
        return self._simple_operands_slow(tok, s)

    def _simple_operands_slow(self, tok, s: str):
        if "/*" in s:
            s = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), s, flags=re.S)
        out = []
        base = tok.start_pos
        for m in _OPND_RE.finditer(s, 1):
            shape_text, name, gte = m.group(1), m.group(2), m.group(3)
            declared = None
            if shape_text:
                try:
                    declared = parse_array_shape(shape_text)
                except ShapeSyntaxError as e:
                    self.fail(str(e), base + m.start(1) + e.offset)
            out.append(self.resolve(name, declared, gte, base + m.start(2) if not shape_text else base + m.start(1)))
        return out

    def operands(self, c):
        return c[0]

    def named_operand(self, c):
        declared = None
        name_tok = None
        gte = ""
        for x in c:
            if isinstance(x, Shape):
                declared = x
            elif x.type == "NAME":
                name_tok = x
            elif x.type == "GTE_SUFFIX":
                gte += str(x)
        start = name_tok.start_pos
        return self.resolve(str(name_tok), declared, gte, start)

    def nested_operand(self, c):
        declared = c[0] if isinstance(c[0], Shape) else None
        op = c[-1]
        self.anon += 1
        name = f"{op[0]}.anon"
        instr = self.make_instruction(name, declared, op, [], op[3], nested=True)
        depth = 1 + max((self.nest_depth.get(o, 0) for o in instr.operands), default=0)
        if depth > MAX_NESTING:
            self.fail("maximum recursion depth exceeded", op[3])
        self.nest_depth[instr] = depth
        return instr

    def resolve(self, name: str, declared: Shape | None, gte: str, offset: int) -> Instruction:
        key = name[1:] if name.startswith("%") else name
        instr = self.names.get(key)
        if instr is None:
            if self.single and not gte:
                if declared is None:
                    self.fail("Operand had no shape in HLO text", offset)
                return self.missing_operand(key, declared)
            self.fail(f"instruction does not exist: {key}", offset)
        if gte:
            self.saw_compact_gte = True
            cur = instr
            cur_name = key
            for ix in re.findall(r"#(-?\d+)", gte):
                i = int(ix)
                if not cur.shape.is_tuple:
                    self.fail(f"GTE operand must be tuple, but has shape: {cur.shape.to_string(False)}", offset)
                if i < 0 or i >= len(cur.shape.tuple_shapes):
                    self.fail(f"GTE index {i} out of bounds for shape: {cur.shape.to_string(False)}", offset)
                cur_name = f"{cur_name}#{i}"
                got = self.names.get(cur_name)
                if got is None:
                    g = Instruction("get-tuple-element", cur.shape.tuple_shapes[i], [cur],
                                    name=self.unique(cur_name.replace("#", "_")),
                                    attrs={"index": str(i)})
                    g.pos = offset
                    self.cur.add_instruction(g)
                    self.names[cur_name] = g
                    self.names[g.name] = g
                    got = g
                cur = got
            instr = cur
        if declared is not None and not compatible(declared, instr.shape):
            self.fail(f"The declared operand shape {declared} is not compatible with the "
                      f"shape of the operand instruction {instr.shape}.", offset)
        return instr

    def unique(self, base: str) -> str:
        name = base
        n = 0
        while name in self.names:
            n += 1
            name = f"{base}.{n}"
        return name

    # -- ops ----------------------------------------------------------------------
    def op(self, c):
        tok = c[0]
        return (str(tok), c[1], None, tok.start_pos)

    def constant_op(self, c):
        lit = c[1]
        return ("constant", [], lit, c[0].start_pos)

    def literal(self, c):
        return c[0]

    def parameter_op(self, c):
        return ("parameter", [], c[1], c[0].start_pos)

    def split_attributes(self, tok) -> list:
        """One ATTRIBUTES token -> [(key, value, offset of key, offset of
        value)], one per ``, key=value``."""
        if tok is None:
            return []
        base = tok.start_pos
        out = []
        for m in self.attr_re.finditer(tok):
            text = m.group(0)
            eq = text.index("=")
            key = text[1:eq].strip()
            value = text[eq + 1:]
            start = base + m.start()
            if value[:1].isspace():
                stripped = value.lstrip()
                out.append((key, stripped, start + text.index(key, 1),
                            start + eq + 1 + len(value) - len(stripped)))
            else:
                out.append((key, value, start + text.index(key, 1), start + eq + 1))
        return out

    # -- instructions -------------------------------------------------------------
    # The instruction alternatives of the grammar all end here.
    def instr_simple(self, c):
        # [ROOT] INSTR_NAME ARRAY_SHAPE OPCODE OPERAND_LIST [ATTRIBUTES]
        i = 1 if c[0].type == "ROOT" else 0
        shape = self.array_shape((c[i + 1],))
        opcode_tok = c[i + 2]
        op = (str(opcode_tok), self.simple_operands((c[i + 3],)), None, opcode_tok.start_pos)
        return self.finish(c, i, shape, op, c[i + 4] if len(c) > i + 4 else None)

    def instr_constant(self, c):
        i = 1 if c[0].type == "ROOT" else 0
        shape = self.array_shape((c[i + 1],))
        op = ("constant", [], c[i + 3], c[i + 2].start_pos)
        return self.finish(c, i, shape, op, c[i + 4] if len(c) > i + 4 else None)

    def instr_parameter(self, c):
        i = 1 if c[0].type == "ROOT" else 0
        shape = self.array_shape((c[i + 1],))
        op = ("parameter", [], c[i + 3], c[i + 2].start_pos)
        return self.finish(c, i, shape, op, c[i + 4] if len(c) > i + 4 else None)

    def instr_general(self, c):
        i = 1 if isinstance(c[0], Tok) and c[0].type == "ROOT" else 0
        j = i + 1
        shape = None
        if isinstance(c[j], Tok) and c[j].type == "ARRAY_SHAPE":
            shape = self.array_shape((c[j],))
            opcode_tok = c[j + 1]
            op = (str(opcode_tok), c[j + 2], None, opcode_tok.start_pos)
            rest = c[j + 3:]
        else:
            if isinstance(c[j], Shape):
                shape = c[j]
                j += 1
            op = c[j]
            rest = c[j + 1:]
        return self.finish(c, i, shape, op, rest[0] if rest else None)

    def instruction(self, c):
        """Single-instruction mode: ``[ROOT] [name =] [shape] op [attrs]``."""
        i = 1 if isinstance(c[0], Tok) and c[0].type == "ROOT" else 0
        if isinstance(c[i], Tok) and c[i].type == "INSTR_NAME":
            return self.instr_general(c)
        # No name: `f32[2] add(...)`.
        shape = c[i] if isinstance(c[i], Shape) else None
        op = c[i + 1] if shape is not None else c[i]
        rest = c[i + 2:] if shape is not None else c[i + 1:]
        attrs = self.split_attributes(rest[0]) if rest else []
        instr = self.make_instruction(op[0], shape, op, attrs, op[3])
        self.root = instr
        return None

    def finish(self, c, i, shape, op, attrs_tok):
        name_tok = c[i]
        name = str(name_tok)[:-1].rstrip()
        if name[0] == "%":
            name = name[1:]
        attr_toks = self.split_attributes(attrs_tok) if attrs_tok is not None else ()
        instr = self.make_instruction(name, shape, op, attr_toks, name_tok.start_pos)
        if i:
            if self.root is not None:
                self.fail("one computation should have only one ROOT", c[0].start_pos)
            self.root = instr
        return None

    def operand_list(self, c):
        out = [x for x in c if isinstance(x, Instruction)]
        if len(out) > MAX_OPERANDS:
            self.fail(f"too many operands ({len(out)}); hlorun accepts at most "
                      f"{MAX_OPERANDS} per instruction", self._last_pos)
        return out

    def make_instruction(self, name: str, shape: Shape | None, op, attr_toks,
                         offset: int, nested: bool = False) -> Instruction:
        opcode, operands, payload, op_off = op
        base_opcode = opcode
        sugar = None
        if opcode not in OPCODES:
            sugar = split_async_sugar(opcode)
            if sugar is None:
                self.fail(f"expects opcode but sees: {opcode}; Unknown opcode: {opcode}", op_off)
            base_opcode = sugar[0]
        # Attributes.
        attrs: dict[str, Any] = {}
        schema, required = _schema_for(opcode, base_opcode, sugar)
        preds = None
        attr_ok = self.attr_ok
        for key, value, koff, voff in attr_toks:
            if key in attrs:
                self.fail(f"attribute {key} already exists", koff)
            spec = schema.get(key)
            if spec is None:
                allowed = sorted(schema)
                self.fail(f'unexpected attribute "{key}". Allowed attributes: {", ".join(allowed)}',
                          koff)
            kind = spec[0]
            if kind == "computation":
                attrs[key] = self.computation_ref(value, voff)
            elif kind == "computation_list":
                attrs[key] = self.computation_list(value, voff)
            elif kind == "instruction_list":
                preds = self.instruction_list(value, voff)
            else:
                if kind == "braced" or kind == "string_or_json":
                    if value[0] != "{" and (kind == "braced" or value[0] != '"'):
                        self.fail(f"attribute {key}: expects "
                                  f"{'{...}' if kind == 'braced' else 'a string or JSON dict'}, "
                                  f"saw '{_clip(value)}'", voff)
                    if key == "metadata":  # passes read it later: check it now
                        try:
                            A.parse_metadata(value)
                        except ValueError as e:
                            self.fail(f"attribute metadata: {e}", voff)
                elif (kind, value) not in attr_ok:
                    try:
                        A.VALIDATORS[kind](value)
                    except (ValueError, ShapeSyntaxError) as e:
                        self.fail(f"attribute {key}: {e}", voff)
                    if len(value) < 200:
                        attr_ok[(kind, value)] = True
                attrs[key] = value
        if nested and attrs:
            self.fail("nested instructions cannot have attributes", offset)
        for key in required:
            if key not in attrs:
                self.fail(f"attribute {key} is expected but not seen", op_off)
        n_expected = OPCODES[base_opcode]
        if base_opcode in _ASYNC_OPS or sugar is not None:
            pass
        elif n_expected != VARIADIC and base_opcode not in ("parameter", "constant") \
                and len(operands) != n_expected:
            self.fail(f"expects {n_expected} operands, but has {len(operands)} operands", op_off)
        self.check_opcode_rules(base_opcode, opcode, sugar, shape, operands, attrs, op_off)
        if shape is None:
            from ..ir.shape_inference import CAN_INFER, infer_shape
            inferred = None
            if base_opcode in CAN_INFER:
                try:
                    inferred = infer_shape(base_opcode, operands, attrs)
                except (ValueError, KeyError, IndexError) as e:
                    self.fail(f"failed to infer shape for opcode: {opcode}, error: {e}", op_off)
            if inferred is None:
                self.fail(f"cannot infer shape for opcode: {opcode}", op_off)
            shape = inferred
        if base_opcode == "broadcast" and "dimensions" not in attrs:
            attrs["dimensions"] = "{}"  # a scalar's broadcast: XLA fills and prints {}
        if base_opcode in _OWN_SHAPE and sugar is None:
            shape = _own_shape(base_opcode, operands, shape)
        instr = Instruction(opcode, shape, operands, name=name, attrs=attrs)
        instr.pos = offset
        if opcode == "parameter":
            num_tok = payload
            n = int(str(num_tok).strip("() \t"))
            if n < 0:
                self.fail("parameter number must be >= 0", num_tok.start_pos)
            if n >= len(self.text):  # parameters 0..n must all be in the text
                self.fail(f"parameter number {n} is out of range: the module text "
                          f"({len(self.text)} characters) cannot define {n} other "
                          f"parameters", num_tok.start_pos)
            if n in self.param_numbers:
                self.fail(f"Duplicate parameter number {n}", num_tok.start_pos)
            self.param_numbers.add(n)
            instr.parameter_number = n
            if "parameter_replication" in attrs:
                leaves = len(shape.leaves())
                reps = [x for x in re.split(r"[{},\s]+", attrs["parameter_replication"]) if x]
                if len(reps) != leaves:
                    self.fail(f"parameter has {leaves} leaf buffers, but parameter_replication "
                              f"has {len(reps)} elements.", offset)
        elif opcode == "constant":
            lit_tok = payload
            lit_text = str(lit_tok)[1:-1]
            try:
                validate_literal(lit_text, shape)
            except LiteralError as e:
                self.fail(e.args[0], lit_tok.start_pos + 1 + e.offset)
            instr.literal = Literal(lit_text, shape)
        if name in self.names and not nested:
            prev = self.names[name]
            line = offset_to_line_col(self.text, prev.pos)[0]
            self.fail(f"instruction {name} already defined on line {line}", offset)
        if nested:
            name = self.unique(name)
            instr.name = name
        self.cur.add_instruction(instr)
        self.names[name] = instr
        self.last = instr
        if preds:
            for p in preds:
                p.add_control_dependency_to(instr)
        return instr

    def check_opcode_rules(self, base, opcode, sugar, shape, operands, attrs, off):
        if base in _ASYNC_OPS or sugar is not None:
            return self.check_async(base, opcode, sugar, shape, operands, attrs, off)
        if base == "dynamic-reshape" and not operands:
            self.fail("DynamicReshape requires at least one operand.", off)
        if base == "broadcast" and "dimensions" not in attrs:
            if not (operands and operands[0].shape.is_array and operands[0].shape.rank == 0):
                self.fail("attribute dimensions is expected but not seen", off)
        elif base == "conditional":
            if not operands:
                self.fail("conditional expects at least one operand", off)
            pred = operands[0].shape
            if not pred.is_array or pred.rank != 0:
                self.fail("The first operand must be a scalar", off)
            if pred.element_type == "pred":
                if "branch_computations" in attrs:
                    self.fail('unexpected attribute "branch_computations"', off)
                for k in ("true_computation", "false_computation"):
                    if k not in attrs:
                        self.fail(f"attribute {k} is expected but not seen", off)
            elif pred.element_type == "s32":
                for k in ("true_computation", "false_computation"):
                    if k in attrs:
                        self.fail(f'unexpected attribute "{k}"', off)
                if "branch_computations" not in attrs:
                    self.fail("attribute branch_computations is expected but not seen", off)
            else:
                self.fail("The first operand must be a scalar of PRED or S32", off)
        elif base == "custom-call":
            v = attrs.get("api_version")
            if v is not None:
                known = ("API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                         "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI")
                if v == "API_VERSION_UNSPECIFIED":
                    self.fail(f"Invalid API version: {v}", off)
                if v not in known:
                    self.fail(f"Unknown API version: {v}", off)
            olc = attrs.get("operand_layout_constraints")
            if olc is not None:
                shapes = [A.parse_shape_text(p) for p in A.split_top_level(olc[1:-1]) if p.strip()]
                if len(shapes) != len(operands):
                    self.fail(f"Expected {len(operands)} operand layout constraints, "
                              f"{len(shapes)} given", off)
                for i, (s, o) in enumerate(zip(shapes, operands)):
                    if not compatible(s, o.shape):
                        self.fail(f"Operand layout constraint shape {s} for operand {i} is not "
                                  f"compatible with operand shape {o.shape}", off)
        elif base == "recv" and shape is not None and not shape.is_tuple:
            self.fail("recv expects a tuple shape", off)
        elif base == "infeed" and shape is not None and (not shape.is_tuple or not shape.tuple_shapes):
            self.fail("infeed must have a non-empty tuple shape", off)
        elif base in ("all-gather", "reduce-scatter", "get-dimension-size", "set-dimension-size"):
            if "dimensions" in attrs and not A.parse_int_list(attrs["dimensions"]):
                self.fail(f"{base} expects a non-empty dimensions attribute", off)
        elif base == "scan":
            dims = A.parse_int_list(attrs["dimensions"])
            rank = operands[0].shape.rank if operands and operands[0].shape.is_array else 0
            if any(d < 0 or d >= max(rank, 1) for d in dims):
                self.fail("scan dimension out of range", off)
        elif base in ("rng-bit-generator", "reduce-window") and not operands:
            self.fail(f"{base} expects operands", off)

    def check_async(self, base, opcode, sugar, shape, operands, attrs, off):
        kind = sugar[1] if sugar else {"async-start": "-start", "async-update": "-update",
                                       "async-done": "-done"}[base]
        if shape is None:
            self.fail(f"Async op {opcode} must have an explicit shape.", off)
        if kind in ("-start", "-update"):
            if (not shape.is_tuple or len(shape.tuple_shapes) < 2
                    or not shape.tuple_shapes[0].is_tuple):
                self.fail("AsyncStart and AsyncUpdate expect the shape to be in the form of "
                          "((operand0_shape, operand1_shape, ...), output_shape, ...).", off)
        if kind in ("-update", "-done"):
            if not operands:
                self.fail("No operand found for AsyncUpdate and AsyncDone", off)
            prev = operands[0]
            prev_sugar = split_async_sugar(prev.opcode)
            if prev.opcode not in ("async-start", "async-update") and (
                    prev_sugar is None or prev_sugar[1] not in ("-start", "-update")):
                self.fail("AsyncUpdate and AsyncDone expect an asynchronous operation as "
                          "their first operand.", off)
            if sugar is not None:
                wrapped = prev_sugar[0] if prev_sugar else None
                if wrapped is not None and wrapped != sugar[0]:
                    self.fail(f"Expect async wrapped opcode to be {wrapped}, but got {sugar[0]}", off)
            prev_thread = A.unquote(prev.attrs.get("async_execution_thread", '"main"'))
            thread = attrs.get("async_execution_thread")
            if thread is not None and A.unquote(thread) != prev_thread:
                self.fail(f"Expect async_execution_thread to be {prev_thread}, but got "
                          f"{A.unquote(thread)}", off)
            calls = attrs.get("calls")
            prev_calls = _async_calls(prev)
            if calls is not None and prev_calls is not None and calls is not prev_calls:
                self.fail(f"Expect async_wrapped_computation to be {prev_calls.name}, but got "
                          f"{calls.name}", off)
        if base == "async-start":
            calls = attrs.get("calls")
            if isinstance(calls, Computation):
                if calls.name in self._async_users:
                    self.fail(f"Computation {calls.name} is called by more than one async op", off)
                self._async_users[calls.name] = True

    def computation_ref(self, value: str, offset: int) -> Computation:
        v = value.strip()
        if v.startswith("{"):
            return self.inline_computation(v, offset)
        name = v[1:] if v.startswith("%") else v
        if not A._NAME_RE.match(v):
            self.fail(f"expects computation name, saw '{v}'", offset)
        comp = self.computations.get(name)
        if comp is None:
            self.fail(f"computation does not exist: {name}", offset)
        return comp

    def computation_list(self, value: str, offset: int) -> list[Computation]:
        v = value.strip()
        if not (v.startswith("{") and v.endswith("}")):
            self.fail(f"expects '{{' computation list '}}', saw '{v}'", offset)
        out = []
        for part in A.split_top_level(v[1:-1]):
            p = part.strip()
            if p:
                out.append(self.computation_ref(p, offset + v.find(p)))
        return out

    def instruction_list(self, value: str, offset: int) -> list[Instruction]:
        v = value.strip()
        if not (v.startswith("{") and v.endswith("}")):
            self.fail(f"expects '{{' instruction list '}}', saw '{v}'", offset)
        out = []
        for part in v[1:-1].split(","):
            p = part.strip()
            if not p:
                continue
            name = p[1:] if p.startswith("%") else p
            got = self.names.get(name)
            if got is None:
                self.fail(f"'{name}' is not defined", offset + v.find(p))
            out.append(got)
        return out

    def inline_computation(self, text: str, offset: int) -> Computation:
        """``to_apply={ x = f32[] parameter(0) ... }``: parse the body with a
        nested parser and register it under a generated name."""
        self.anon += 1
        base = (self.cur.name if self.cur else "comp") + ".inline"
        name = base
        n = 0
        while name in self.computations:
            n += 1
            name = f"{base}.{n}"
        sub = _get_parser()
        wrapped = f"{name} {text}"
        try:
            inner = sub.parse_text(wrapped, self.filename, nested_from=self)
        except HloParseError as e:
            self.fail(e.message, offset)
        inner.is_entry = False
        return inner

    # -- computations -------------------------------------------------------------
    def instructions(self, c):
        return None

    def computation_head(self, c):
        is_entry = False
        name_tok = None
        sig = None
        for x in c:
            if isinstance(x, Token):
                if x.type == "ENTRY":
                    is_entry = True
                elif x.type == "NAME":
                    name_tok = x
            elif isinstance(x, tuple):
                sig = x
        name = str(name_tok)
        if name.startswith("%"):
            name = name[1:]
        if name in self.computations:
            prev = self.computations[name]
            line = offset_to_line_col(self.text, prev.pos)[0]
            self.fail(f"computation previously defined here: {name} (line {line})", name_tok.start_pos)
        comp = Computation(name)
        comp.pos = name_tok.start_pos
        self.cur = comp
        self.names = {}
        self.root = None
        self.last = None
        self.entry_pending = is_entry
        self.sig = sig
        self.comp_tok = name_tok
        self.param_numbers = set()
        return None

    def signature(self, c):
        params = [x for x in c if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], Shape)]
        result = [x for x in c if isinstance(x, Shape)]
        sig_params = [p for p in params]
        return ("sig", sig_params, result[-1] if result else None, c[0].start_pos if isinstance(c[0], Token) else 0)

    def simple_signature(self, c):
        tok = c[0]
        text = str(tok)
        arrow = text.rindex("->")
        result = text[arrow + 2:].strip()
        try:
            shape = parse_array_shape(result)
        except ShapeSyntaxError as e:
            self.fail(str(e), tok.start_pos + arrow + 2)
        return ("sig", None, shape, tok.start_pos)

    def param(self, c):
        return (str(c[0]).rstrip(": \t"), c[1])

    def computation(self, c):
        comp = self.cur
        attr_toks = []
        for x in c:
            if isinstance(x, Tok) and x.type == "ATTRIBUTES":
                attr_toks = self.split_attributes(x)
        root = self.root or self.last
        comp.root = root
        for i, p in enumerate(comp.parameters):
            if p is None:
                self.fail(f"computation {comp.name} has no parameter {i}", self.comp_tok.start_pos)
        sig = self.sig
        if sig is not None and sig[2] is not None and not compatible(root.shape, sig[2]):
            self.fail(f"Shape of computation {comp.name}, {sig[2].to_string(False)}, is not "
                      f"compatible with that of its root instruction {root.name}, "
                      f"{root.shape.to_string(False)}", sig[3])
        for key, value, koff, voff in attr_toks:
            if key != "execution_thread":
                self.fail(f'unexpected attribute "{key}". Allowed attributes: execution_thread',
                          koff)
            try:
                A._v_string(value)
            except ValueError as e:
                self.fail(str(e), voff)
            comp.execution_thread = A.unquote(value)
        if self.entry_pending:
            if self.entry is not None:
                self.fail("expects only one ENTRY", self.comp_tok.start_pos)
            self.entry = comp
        self.computations[comp.name] = comp
        self.comp_order.append(comp)
        self.cur = None
        return comp

    # -- module -------------------------------------------------------------------
    def module_name(self, c):
        return c[0]

    def header(self, c):
        attrs = []
        for x in c[2:]:
            if isinstance(x, Tok) and x.type == "ATTRIBUTES":
                attrs = self.split_attributes(x)
        return ("header", c[1], attrs)

    def sf_string(self, c):
        return (int(c[0]), str(c[1]))

    def sf_entry(self, c):
        return (int(c[0]), str(c[1]))

    def stack_frame_index(self, c):
        sections: dict[str, list] = {"FileNames": [], "FunctionNames": [],
                                     "FileLocations": [], "StackFrames": []}
        cur = None
        for x in c:
            if isinstance(x, Token):
                cur = str(x)
            elif isinstance(x, tuple) and cur is not None:
                sections[cur].append(x)
        return ("stack_frames", sections)

    def module(self, c):
        header = None
        frames = None
        for x in c:
            if isinstance(x, tuple) and x and x[0] == "header":
                header = x
            elif isinstance(x, tuple) and x and x[0] == "stack_frames":
                frames = x[1]
        m = Module()
        m.filename = self.filename
        for comp in self.comp_order:
            m.add_computation(comp)
        entry = self.entry or (self.comp_order[-1] if self.comp_order else None)
        # XLA: without ENTRY, the last computation is the entry.
        m.set_entry(entry)
        if self.entry is None and self.comp_order:
            # Keep textual order but make sure the entry is known.
            pass
        if header is not None:
            name = str(header[1])
            m.name = name[1:] if name.startswith("%") else name
            seen = set()
            for key, value, koff, off in header[2]:
                if key in seen:
                    self.fail(f"attribute {key} already exists", koff)
                seen.add(key)
                kind = A.HEADER_SCHEMA.get(key)
                if kind is None:
                    self.fail(f'unexpected attribute "{key}". Allowed attributes: '
                              f'{", ".join(sorted(A.HEADER_SCHEMA))}', koff)
                try:
                    A.VALIDATORS[kind](value)
                    if key == "input_output_alias":
                        m.input_output_alias = list(A.parse_input_output_alias(value))
                        continue
                    if key == "buffer_donor":
                        m.buffer_donor = list(A.parse_buffer_donor(value))
                        continue
                    if key == "entry_computation_layout":
                        A.parse_computation_layout(value)
                except (ValueError, ShapeSyntaxError) as e:
                    self.fail(str(e), off)
                if key == "is_scheduled":
                    m.is_scheduled = value == "true"
                    continue
                m.header_attrs[key] = value
        else:
            m.name = "module_" + (entry.name if entry else "")
        if frames is not None:
            m.stack_frames = frames
        m.compact_gte = self.saw_compact_gte
        m.source = self.text
        return m

    def start(self, c):
        return c[0]

    def begin_single(self) -> None:
        """Single-instruction mode (XLA's ParseSingleInstruction)."""
        self.single = True
        comp = Computation("_")
        self.cur = comp
        self.names = {}
        self.param_count = 0

    def single_instruction(self, c):
        self.instruction(c)
        comp = self.cur
        comp.root = self.root or self.last
        for i, p in enumerate(comp.parameters):  # XLA CHECK-fails: param_no < param_count
            if p is None:
                self.fail(f"invalid parameter number: computation has no parameter {i}",
                          max(comp.root.pos, 0) if comp.root is not None else 0)
        m = Module("_")
        m.filename = self.filename
        for other in self.comp_order:
            m.add_computation(other)
        m.add_computation(comp, entry=True)
        m.is_scheduled = True
        m.source = self.text
        return m

    def unnamed_operand(self, c):
        shape = c[0]
        if not self.single:
            self.fail("expects name", self._last_pos)
        return self.missing_operand("", shape)

    def missing_operand(self, name: str, shape: Shape) -> Instruction:
        n = self.param_count
        self.param_count += 1
        pname = name or f"_{n}"
        p = Instruction("parameter", shape, name=pname)
        p.parameter_number = n
        self.cur.add_instruction(p)
        self.names[pname] = p
        return p


_SCHEMAS: dict[str, tuple[dict, tuple]] = {}


def _schema_for(opcode: str, base: str, sugar) -> tuple[dict, tuple]:
    """(attribute -> (type, required), required names) for an opcode as
    written (async sugar ``custom-call-start`` takes the wrapped op's)."""
    got = _SCHEMAS.get(opcode)
    if got is None:
        schema = dict(A.SCHEMA.get(base, {}))
        if sugar is not None:
            schema = {k: (v[0], v[1] and sugar[1] == "-start") for k, v in schema.items()}
            schema.update({"async_execution_thread": ("string", False),
                           "calls": ("computation", False)})
            if sugar[1] == "-start":
                schema["output_to_operand_aliasing"] = ("aliasing", False)
        merged = {**A.COMMON, **schema}
        required = tuple(k for k, (_, req) in schema.items() if req)
        got = (merged, required)
        _SCHEMAS[opcode] = got
    return got


_SINGLE_RE = re.compile(
    _SKIP + r"(?:ROOT\s|%?[A-Za-z_][\w.\-]*[ \t]*=(?!=)|[a-z][a-z0-9]*\[|\()")

_OPND_RE = re.compile(
    r"\s*(?:,\s*)?(?:([a-z][a-z0-9]*\[[^\]]*\](?:\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})?)\s+)?"
    r"(%?[A-Za-z_][A-Za-z0-9_.\-]*)((?:#-?\d+)*)")


_ARRAY_SHAPE_RE = re.compile(
    r"[a-z][a-z0-9]*\[[^\]]*\](?:[ \t]*\{(?=[ \t]*[0-9:])[^{}]*(?:\{[^{}]*\}[^{}]*)*\})?")


def _flat_tuple(text: str, base: int, b: _Builder) -> Shape:
    if len(text) > 2 * MAX_OPERANDS and text.count("]") > MAX_OPERANDS:
        b.fail(f"too many tuple elements ({text.count(']')}); hlorun accepts at most "
               f"{MAX_OPERANDS}", base)
    shapes = []
    for m in _ARRAY_SHAPE_RE.finditer(text):
        try:
            shapes.append(parse_array_shape(m.group(0)))
        except ShapeSyntaxError as e:
            b.fail(str(e), base + m.start() + e.offset)
    return Shape.tuple(shapes)




def _async_calls(instr: Instruction):
    c = instr.attrs.get("calls")
    if isinstance(c, Computation):
        return c
    if instr.operands and instr.opcode in ("async-update",):
        return _async_calls(instr.operands[0])
    return None


class HloParser:
    """A reusable parser (grammar loaded once, per-state scanners cached)."""

    def __init__(self):
        self.builder = _Builder()
        text = grammar_bytes().decode("utf-8")
        try:
            self.lark = Lark(text, parser="lalr", lexer="basic", start="start",
                             transformer=self.builder, maybe_placeholders=False,
                             cache=_cache_file())
        except Exception:  # an unreadable or half-written cache: build afresh
            self.lark = Lark(text, parser="lalr", lexer="basic", start="start",
                             transformer=self.builder, maybe_placeholders=False)
        self.scanner = _Scanner(self.lark)
        self.builder.parse_text = self.parse_text  # for inline computations
        self.builder.attr_re = re.compile(_attr_regex(self.lark))
        # Lark's LALR tables, flattened for the driver: per state, terminal ->
        # next state (shift, an int) or (size, callback, rule) (reduce); rule
        # name -> next state (goto).
        lp = self.lark.parser.parser.parser
        pt = lp.parse_table
        callbacks = lp.callbacks
        self.tables = {}
        for state, actions in pt.states.items():
            row = {}
            for sym, (action, arg) in actions.items():
                if action.name == "Shift":
                    row[sym] = arg
                else:
                    row[sym] = (len(arg.expansion), callbacks[arg], arg.origin.name)
            self.tables[state] = row
        self.start_state = pt.start_states["start"]
        self.end_state = pt.end_states["start"]

    def parse_text(self, text: str, filename: str | None = None, nested_from=None):
        """Parse a whole module (or, when ``nested_from`` is given, one
        inline computation ``name { ... }`` in that parser's context)."""
        b = self.builder
        if nested_from is not None:
            saved = b.__dict__.copy()
            b.names = {}
            b.root = None
            b.last = None
            b.param_numbers = set()
            b.entry_pending = False
            b.text = text
            try:
                m = self._run(text, filename, nested=True)
            finally:
                comps = b.comp_order
                b.__dict__.update(saved)
            return comps[-1]
        if text.startswith("\ufeff"):  # a UTF-8 byte-order mark: whitespace,
            text = " " + text[1:]      # keeping every offset (line:col) as is
        b.reset(text, filename)
        try:
            if _SINGLE_RE.match(text):
                b.begin_single()
            return self._run(text, filename)
        finally:
            # The parser is shared (``_get_parser``): its name table would
            # keep every parsed instruction alive, those a pass removes
            # included, until the next parse.
            b.reset("", None)

    def _run(self, text: str, filename: str | None, nested: bool = False):
        """Drive Lark's LALR(1) tables: scan a token for the current state,
        shift it or reduce (calling the transformer callbacks) until it is
        shifted; at the end reduce until the start rule is accepted."""
        tables = self.tables
        scanners = self.scanner.cache
        for_state = self.scanner.for_state
        stack = [self.start_state]
        values: list = []
        push_s = stack.append
        push_v = values.append
        pos = 0
        n = len(text)
        skip = self.scanner.skip_only.match
        new = str.__new__
        end_state = self.end_state
        try:
            while True:
                st = stack[-1]
                row = tables[st]
                sc = scanners.get(st)
                if sc is None:
                    sc = for_state(st)
                m = sc[0].match(text, pos)
                if m is not None:
                    kind = m.lastgroup
                    tok = new(Tok, m.group(kind))
                    tok.type = kind
                    tok.start_pos = m.start(kind)
                    pos = m.end()
                else:
                    pos = skip(text, pos).end()
                    if pos < n:
                        self._lex_error(text, filename, pos, sc[1])
                    kind = "$END"
                    tok = new(Tok, "")
                    tok.type = kind
                    tok.start_pos = n
                while True:
                    act = row.get(kind)
                    if act is None:
                        self._parse_error(text, filename, tok, stack[-1])
                    if act.__class__ is int:
                        push_s(act)
                        push_v(tok)
                        break
                    size, callback, origin = act
                    if size:
                        args = values[-size:]
                        del values[-size:]
                        del stack[-size:]
                    else:
                        args = []
                    push_v(callback(args))
                    nxt = tables[stack[-1]][origin]
                    if nxt == end_state and kind == "$END":
                        return values[-1]
                    push_s(nxt)
                    row = tables[nxt]
        except _Fail as e:
            raise self._error(text, filename, e.message, e.offset) from None
        except RecursionError:
            raise self._error(text, filename, "maximum recursion depth exceeded", pos) from None

    def _parse_error(self, text, filename, tok, state):
        expected = [t for t in self.tables[state] if t.isupper() or t == "$END"]
        if tok.type == "$END":
            msg = f"unexpected end of input; expects {_describe(expected)}"
        else:
            msg = (f"expects {_describe(expected)}, saw {_describe([tok.type])} "
                   f"'{_clip(str(tok))}'")
        raise self._error(text, filename, msg, tok.start_pos)

    def _lex_error(self, text, filename, pos, expected):
        snippet = _clip(text[pos:pos + 40].split("\n")[0])
        if text.startswith("/*", pos):
            raise self._error(text, filename, "unterminated /* comment", pos)
        raise self._error(text, filename, f"expects {_describe(expected)}, saw '{snippet}'", pos)

    def _error(self, text, filename, message, offset) -> HloParseError:
        line, col = offset_to_line_col(text, offset)
        return HloParseError(message, line, col, filename, text)


def _attr_regex(lark: Lark) -> str:
    """The ATTR terminal's regex (one ``, key=value``), cached on disk."""
    import hashlib
    import json
    src = grammar_bytes()
    key = hashlib.sha256(src).hexdigest()[:16]
    cache = _cache_file()
    path = (cache + ".attr.json") if cache else None
    if path and os.path.exists(path):
        try:
            with open(path) as f:
                data = json.load(f)
            if data.get("key") == key:
                return data["regex"]
        except (OSError, ValueError):
            pass
    grammar = getattr(lark, "grammar", None)
    if grammar is None:
        grammar = Lark(src.decode(), parser="lalr", start="start").grammar
    terms, _, _ = grammar.compile(["start"], {"ATTR"})
    regex = next(t for t in terms if t.name == "ATTR").pattern.to_regexp()
    if path:
        try:
            tmp = path + f".{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"key": key, "regex": regex}, f)
            os.replace(tmp, path)
        except OSError:
            pass
    return regex


def _clip(s: str, n: int = 40) -> str:
    s = s.split("\n")[0]
    return s if len(s) <= n else s[: n - 3] + "..."


def _cache_file():
    """Lark's grammar-analysis cache (LALR tables), next to the user cache dir."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = os.path.join(base, "hlorun")
    try:
        os.makedirs(d, exist_ok=True)
        src = grammar_bytes()
        import hashlib
        import lark
        h = hashlib.sha256(src + lark.__version__.encode()).hexdigest()[:16]
        return os.path.join(d, f"hlo-{h}.lark.cache")
    except OSError:
        return False


_PARSER: HloParser | None = None


def _get_parser() -> HloParser:
    global _PARSER
    if _PARSER is None:
        _PARSER = HloParser()
    return _PARSER


def parse_module(text: str, filename: str | None = None) -> Module:
    """Parse HLO module text into a :class:`Module`.

    Raises :class:`hlorun.HloParseError` (with ``line``, ``column``,
    ``message``) on malformed input.
    """
    parser = _get_parser()
    enabled = gc.isenabled()
    gc.disable()
    try:
        module = parser.parse_text(text, filename)
    finally:
        if enabled:
            gc.enable()
    module.filename = filename
    return module


def load_module(path: str | os.PathLike) -> Module:
    """Read (``.gz``/``.xz`` decompressed, ``-`` is stdin) and parse an HLO file."""
    from .fileio import read_text
    return parse_module(read_text(path), "<stdin>" if str(path) == "-" else str(path))


def split_input_file(text: str) -> list[tuple[int, str]]:
    """Split ``// -----`` separated inputs: [(first line number, chunk)]."""
    chunks = []
    line = 1
    cur: list[str] = []
    start = 1
    for ln in text.split("\n"):
        if re.fullmatch(r"\s*//\s*-----\s*", ln):
            chunks.append((start, "\n".join(cur)))
            cur = []
            start = line + 1
        else:
            cur.append(ln)
        line += 1
    chunks.append((start, "\n".join(cur)))
    return [(s, c) for s, c in chunks if c.strip()]
