"""What a GEMM is, as the autotuner sees it: sizes, types, layouts, and what
is fused around the dot.

``gemm_problem(instr)`` reads a ``__triton_gemm`` fusion (the dot inside its
computation plus the fused prologue/epilogue), a BLAS custom call
(``__cublas$gemm`` / ``__cublas$lt$matmul[$f8]``: dimension numbers from the
``gemm_backend_config``), or a bare ``dot``.  Sizes follow XLA's
``TritonDotFusionSearchSpace``: batch = product of the lhs batch dims,
k = product of the lhs contracting dims, m/n = the rest of lhs/rhs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

from ..ir.module import Instruction
from ..ir.opcode import ELEMENTWISE
from ..ir.shape import Shape, bit_width, byte_width, reshape_is_bitcast, transpose_is_bitcast

BLAS_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8")
TRITON_GEMM_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion")

#: XLA's TritonDotFusionSearchSpace::HasExpensiveTransitiveParent set.
EXPENSIVE_OPS = frozenset({"atan2", "cosine", "exponential", "exponential-minus-one", "log",
                           "log-plus-one", "logistic", "power", "rsqrt", "sine", "sqrt",
                           "tan", "tanh"})


@dataclass
class EpilogueOperand:
    """A tensor the fused epilogue loads (the matrix of an add, a bias)."""

    name: str
    shape: Shape
    kind: str                  # "matrix" | "vector" | "scalar"
    transposed: bool = False   # physical layout differs from the output's

    @property
    def bytes(self) -> int:
        return self.shape.byte_size() if self.shape.is_array else 0


@dataclass
class GemmProblem:
    """One GEMM as the cost model and the search space see it."""

    name: str
    batch: int
    m: int
    n: int
    k: int
    lhs_type: str
    rhs_type: str
    dot_type: str              # the dot's result type (XLA's compute_bitwidth)
    out_type: str              # the fusion's / call's result type
    input_bytes: int           # everything the kernel reads (all fusion operands)
    output_bytes: int
    lhs_expensive: bool = False
    rhs_expensive: bool = False
    has_concatenate: bool = False
    prologue_ops: int = 0      # fused ops before the dot (converts, multiplies ...)
    #: dot operands fed through a physical data move inside the fusion
    #: (concatenate, slice, pad, a transpose or reshape that is not a
    #: bitcast ...): a BLAS fission leaves each as a kernel of its own that
    #: writes the operand, which cuBLAS then reads
    prologue_moves: int = 0
    prologue_move_bytes: int = 0
    epilogue_ops: int = 0      # fused elementwise ops after the dot
    epilogue_operands: list[EpilogueOperand] = field(default_factory=list)
    output_canonical: bool = True   # output layout is {n-1,...,1,0}
    output_shape: Shape | None = None
    precision: str = "DEFAULT"
    algorithm: str = "ALG_UNSET"
    source: str = "fusion"     # fusion | custom-call | dot
    #: the contracting dimension is the most minor one (what 8-bit and TF32
    #: warp-group MMA and IMMA need without a transpose)
    lhs_k_major: bool = True
    rhs_k_major: bool = True

    # -- derived ---------------------------------------------------------------
    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def operand_bits(self) -> int:
        """XLA's operand_bitwidth_: the lhs element width (both operands of a
        Triton dot have the same width)."""
        return bit_width(self.lhs_type)

    @property
    def compute_bits(self) -> int:
        return bit_width(self.dot_type)

    @property
    def acc_bytes(self) -> int:
        """Accumulator element bytes (f32 for floating types up to 32 bits,
        like XLA's GetGemmAccumulatorType)."""
        t = self.dot_type
        if t.startswith("f") or t == "bf16":
            return 4 if bit_width(t) <= 32 else byte_width(t)
        if t.startswith("s") or t.startswith("u"):
            return 4
        return byte_width(t)

    @property
    def compute_type(self) -> str:
        """The device peak-rate class this GEMM runs at."""
        t = self.lhs_type
        if t.startswith("f8"):
            return "fp8"
        if t in ("f16", "bf16"):
            return t
        if t == "f32":
            if self.algorithm in ("ALG_DOT_F32_F32_F32",) or self.precision == "HIGHEST":
                return "f32"
            return "tf32"   # XLA's DEFAULT precision lets f32 dots use TF32
        if t == "f64":
            return "f64"
        if t.startswith("s") or t.startswith("u"):
            return "fp8"    # int8 tensor-core rate equals the fp8 rate on these parts
        return "f32"

    @property
    def shape_text(self) -> str:
        b = f"{self.batch}x" if self.batch > 1 else ""
        return f"{b}{self.m}x{self.n}x{self.k}"

    @property
    def types_text(self) -> str:
        ins = self.lhs_type if self.lhs_type == self.rhs_type else f"{self.lhs_type},{self.rhs_type}"
        return f"{ins}->{self.out_type}"

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "m": self.m, "n": self.n, "k": self.k,
                "lhs_type": self.lhs_type, "rhs_type": self.rhs_type, "out_type": self.out_type,
                "flops": self.flops, "input_bytes": self.input_bytes,
                "output_bytes": self.output_bytes, "prologue_ops": self.prologue_ops,
                "prologue_moves": self.prologue_moves, "epilogue_ops": self.epilogue_ops,
                "epilogue_operands": [{"name": e.name, "shape": str(e.shape), "kind": e.kind,
                                       "transposed": e.transposed}
                                      for e in self.epilogue_operands],
                "output_canonical": self.output_canonical}


class NotAGemm(ValueError):
    pass


def _dims_product(shape: Shape, dims) -> int:
    return prod(shape.dimensions[d] for d in dims) if dims else 1


def is_triton_gemm_fusion(instr: Instruction) -> bool:
    if instr.opcode != "fusion" or instr.attrs.get("kind") != "kCustom":
        return False
    cfg = instr.backend_config
    if not isinstance(cfg, dict):
        return False
    return cfg.get("fusion_backend_config", {}).get("kind") in TRITON_GEMM_KINDS


def is_blas_call(instr: Instruction) -> bool:
    return instr.opcode == "custom-call" and instr.custom_call_target in BLAS_TARGETS


def is_canonical_layout(shape: Shape) -> bool:
    if not shape.is_array or shape.layout is None:
        return True
    return tuple(shape.layout.minor_to_major) == tuple(range(len(shape.dimensions) - 1, -1, -1))


def find_dot(comp) -> Instruction | None:
    for i in comp.instructions:
        if i.opcode in ("dot", "scaled-dot"):
            return i
    return None


def _dot_sizes(dot: Instruction) -> tuple[int, int, int, int]:
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    lb, lc = dot.int_list("lhs_batch_dims"), dot.int_list("lhs_contracting_dims")
    k = _dims_product(lhs, lc)
    b = _dims_product(lhs, lb)
    m = lhs.element_count // max(1, k * b)
    n = rhs.element_count // max(1, k * b)
    return b, m, n, k


def _precision(dot: Instruction) -> tuple[str, str]:
    pc = dot.attrs.get("operand_precision", "")
    precision = "HIGHEST" if "highest" in pc.lower() else ("HIGH" if "high" in pc.lower() else "DEFAULT")
    alg = dot.attrs.get("algorithm", "ALG_UNSET")
    return precision, (alg if alg.startswith("ALG") else "ALG_" + alg.upper())


def _bfs_any(start: Instruction, pred, through_users: bool = False) -> bool:
    seen = {start}
    stack = [start]
    while stack:
        cur = stack.pop()
        if pred(cur):
            return True
        nxt = cur.users if through_users else cur.operands
        for o in nxt:
            if o not in seen:
                seen.add(o)
                stack.append(o)
    return False


def _k_major(shape: Shape, contracting) -> bool:
    if not shape.is_array or shape.layout is None or not contracting:
        return True
    mtm = [d for d in shape.layout.minor_to_major if shape.dimensions[d] != 1]
    return not mtm or mtm[0] in set(contracting)


#: data movement that materialises a new tensor (a transpose or reshape only
#: when it is not a bitcast under the layouts)
MOVES = frozenset({"concatenate", "pad", "slice", "dynamic-slice", "reverse", "gather", "broadcast",
                   "copy", "iota"})


def _is_move(i: Instruction) -> bool:
    if i.opcode in MOVES:
        return True
    if i.opcode not in ("transpose", "reshape") or not i.operands:
        return False
    a, b = i.operands[0].shape, i.shape
    if not (a.is_array and b.is_array) or a.layout is None or b.layout is None:
        return False
    if i.opcode == "reshape":
        return not reshape_is_bitcast(a, b)
    return not transpose_is_bitcast(a, b, i.int_list("dimensions"))


def _moved_operands(dot: Instruction) -> tuple[int, int]:
    """(dot operands with a physical move in their producers inside the
    fusion, their bytes)."""
    n, nbytes = 0, 0
    for op in dot.operands[:2]:
        if _bfs_any(op, _is_move):
            n += 1
            nbytes += op.shape.byte_size() if op.shape.is_array else 0
    return n, nbytes


def _effective_parameter(i: Instruction) -> Instruction | None:
    while i.opcode in ("bitcast", "get-tuple-element", "reshape", "transpose", "copy"):
        i = i.operands[0]
    return i if i.opcode == "parameter" else None


def gemm_problem(instr: Instruction) -> GemmProblem:
    """Describe the GEMM ``instr`` computes (a GEMM fusion, a BLAS call or
    a dot).  Raises NotAGemm otherwise."""
    if instr.opcode == "fusion":
        comp = instr.fused_computation
        dot = find_dot(comp) if comp is not None else None
        if dot is None:
            raise NotAGemm(f"{instr.name}: fusion has no dot")
        return _fusion_problem(instr, dot)
    if instr.opcode == "dot":
        b, m, n, k = _dot_sizes(instr)
        precision, alg = _precision(instr)
        return GemmProblem(
            name=instr.name, batch=b, m=m, n=n, k=k,
            lhs_type=instr.operands[0].shape.element_type,
            rhs_type=instr.operands[1].shape.element_type,
            dot_type=instr.shape.element_type, out_type=instr.shape.element_type,
            input_bytes=sum(o.shape.byte_size() for o in instr.operands),
            output_bytes=instr.shape.byte_size(),
            output_canonical=is_canonical_layout(instr.shape), output_shape=instr.shape,
            precision=precision, algorithm=alg, source="dot")
    if is_blas_call(instr):
        return _blas_problem(instr)
    raise NotAGemm(f"{instr.name}: not a GEMM ({instr.opcode})")


def _fusion_problem(fusion: Instruction, dot: Instruction) -> GemmProblem:
    comp = fusion.fused_computation
    b, m, n, k = _dot_sizes(dot)
    precision, alg = _precision(dot)
    # Everything reachable from the dot's operands is prologue; the rest
    # (between the dot and the root) is epilogue.
    ancestors: set[Instruction] = set()
    stack = list(dot.operands)
    while stack:
        cur = stack.pop()
        if cur in ancestors:
            continue
        ancestors.add(cur)
        stack.extend(cur.operands)
    prologue = sum(1 for i in ancestors if i.opcode in ELEMENTWISE)
    epilogue_ops = 0
    epilogue_operands: list[EpilogueOperand] = []
    out_shape = comp.root.shape if comp.root is not None else fusion.shape
    descendants: set[Instruction] = set()
    stack = list(dot.users)
    while stack:
        cur = stack.pop()
        if cur in descendants:
            continue
        descendants.add(cur)
        stack.extend(cur.users)
    seen_params: set[Instruction] = set()
    for i in descendants:
        if i.opcode in ELEMENTWISE:
            epilogue_ops += 1
        for o in i.operands:
            if o is dot or o in descendants:
                continue
            src = o
            kind = "matrix"
            if o.opcode == "broadcast":
                src = o.operands[0]
                kind = "scalar" if src.shape.is_array and src.shape.element_count == 1 else "vector"
            elif o.shape.is_array and o.shape.element_count == 1:
                kind = "scalar"
            param = _effective_parameter(src)
            if param is None or param in seen_params:
                continue
            seen_params.add(param)
            transposed = False
            if kind == "matrix" and out_shape.is_array and o.shape.is_array and o.shape.layout is not None \
                    and out_shape.layout is not None and len(o.shape.dimensions) == len(out_shape.dimensions):
                transposed = tuple(o.shape.layout.minor_to_major) != tuple(out_shape.layout.minor_to_major) \
                    or (src is not o and src.opcode != "bitcast" and o.opcode == "transpose")
            epilogue_operands.append(EpilogueOperand(param.name, param.shape, kind, transposed))
    moves, move_bytes = _moved_operands(dot)
    return GemmProblem(
        name=fusion.name, batch=b, m=m, n=n, k=k,
        lhs_type=dot.operands[0].shape.element_type, rhs_type=dot.operands[1].shape.element_type,
        dot_type=dot.shape.element_type, out_type=fusion.shape.element_type if fusion.shape.is_array else dot.shape.element_type,
        input_bytes=sum(o.shape.byte_size() for o in fusion.operands if o.shape.is_array),
        output_bytes=fusion.shape.byte_size() if fusion.shape.is_array else dot.shape.byte_size(),
        lhs_expensive=_bfs_any(dot.operands[0], lambda i: i.opcode in EXPENSIVE_OPS),
        rhs_expensive=_bfs_any(dot.operands[1], lambda i: i.opcode in EXPENSIVE_OPS),
        has_concatenate=_bfs_any(dot, lambda i: i.opcode == "concatenate"),
        prologue_ops=prologue, epilogue_ops=epilogue_ops, epilogue_operands=epilogue_operands,
        prologue_moves=moves, prologue_move_bytes=move_bytes,
        output_canonical=is_canonical_layout(fusion.shape) if fusion.shape.is_array else True,
        output_shape=fusion.shape, precision=precision, algorithm=alg, source="fusion",
        lhs_k_major=_k_major(dot.operands[0].shape, dot.int_list("lhs_contracting_dims")),
        rhs_k_major=_k_major(dot.operands[1].shape, dot.int_list("rhs_contracting_dims")))


def _blas_problem(call: Instruction) -> GemmProblem:
    cfg = call.backend_config or {}
    g = cfg.get("gemm_backend_config", {}) if isinstance(cfg, dict) else {}
    dims = g.get("dot_dimension_numbers", {})
    lhs, rhs = call.operands[0].shape, call.operands[1].shape
    lb = [int(x) for x in dims.get("lhs_batch_dimensions", [])]
    lc = [int(x) for x in dims.get("lhs_contracting_dimensions", [])]
    k = _dims_product(lhs, lc)
    b = _dims_product(lhs, lb)
    m = lhs.element_count // max(1, k * b)
    n = rhs.element_count // max(1, k * b)
    out = call.shape.tuple_shapes[0] if call.shape.is_tuple else call.shape
    ops: list[EpilogueOperand] = []
    if float(g.get("beta", 0) or 0) != 0 and len(call.operands) > 2:
        c = call.operands[2]
        ops.append(EpilogueOperand(c.name, c.shape, "matrix"))
    epi = g.get("epilogue", "DEFAULT")
    pc = g.get("precision_config", {})
    return GemmProblem(
        name=call.name, batch=b, m=m, n=n, k=k, lhs_type=lhs.element_type, rhs_type=rhs.element_type,
        dot_type=out.element_type, out_type=out.element_type,
        input_bytes=sum(o.shape.byte_size() for o in call.operands if o.shape.is_array),
        output_bytes=out.byte_size(), epilogue_ops=0 if epi == "DEFAULT" else 1,
        epilogue_operands=ops, output_canonical=is_canonical_layout(out), output_shape=out,
        precision="HIGHEST" if "HIGHEST" in pc.get("operand_precision", []) else "DEFAULT",
        algorithm=pc.get("algorithm", "ALG_UNSET"), source="custom-call")
