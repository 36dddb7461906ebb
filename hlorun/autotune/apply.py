"""Applying an autotuning decision the way XLA does.

* Triton: the ``__triton_gemm`` fusion keeps its body; its backend config
  gets ``triton_gemm_config`` (XLA's TritonBackend::ApplyConfig), printed as
  in the dumps: ``{"kind":"__triton_gemm","triton_gemm_config":{"block_k":"64",...}}``.
* BLAS: XLA's FissionBackend -- the fused computation is copied into a
  scratch module, DotAlgorithmRewriter splits a BF16_BF16_F32_X3/X6/X9 or
  TF32_TF32_F32_X3 dot into the plain GEMMs the library runs (FissionToCublas),
  the BLAS rewriter (hlorun's ``cublas-gemm-rewriter``, not a copy of it)
  turns each dot into the library custom call, the chosen
  algorithm goes into ``selected_algorithm`` / ``autotune_workspace_size``,
  and the result is inlined in place of the fusion.  The library writes
  the canonical layout only, so the call's output is pinned to
  ``{n-1,...,1,0}``: layout-agnostic users (a reshape ...) read it directly,
  which is how a bitcast reshape downstream stops being one (S0).
"""

from __future__ import annotations

from ..ir.module import Computation, Instruction, Module
from ..passes.base import Target
from ..errors import PassError
from .blas import LIBRARIES
from .triton import TritonConfig


def apply_triton(fusion: Instruction, cfg: TritonConfig) -> None:
    bc = fusion.backend_config
    bc = dict(bc) if isinstance(bc, dict) else {}
    fbc = dict(bc.get("fusion_backend_config") or {})
    fbc["kind"] = "__triton_gemm"
    fbc["triton_gemm_config"] = cfg.to_backend_json()
    fbc.pop("block_level_fusion_config", None)
    bc["fusion_backend_config"] = fbc
    for key, default in (("device_type", "DEVICE_TYPE_INVALID"), ("force_earliest_schedule", False),
                         ("operation_queue_id", "0"), ("reification_cost", [])):
        bc.setdefault(key, default)
    fusion.set_backend_config(bc)


def _clone_computation(comp: Computation, module: Module, name: str) -> Computation:
    new = Computation(name)
    module.add_computation(new, entry=True)
    mapping: dict[Instruction, Instruction] = {}
    for instr in comp.post_order():
        c = Instruction(instr.opcode, instr.shape, [mapping[o] for o in instr.operands],
                        instr.name, dict(instr.attrs))
        c.parameter_number = instr.parameter_number
        c.literal = instr.literal
        new.add_instruction(c)
        mapping[instr] = c
    new.root = mapping[comp.root]
    return new


def _inline(fusion: Instruction, body: Computation,
            added: list[Instruction] | None = None) -> Instruction:
    """Replace ``fusion`` by the instructions of ``body`` (its parameters
    bound to the fusion's operands); returns the new root (``added``
    receives the new instructions, in the order they were added)."""
    parent = fusion.parent
    mapping: dict[Instruction, Instruction] = {}
    for instr in body.post_order():
        if instr.opcode == "parameter":
            mapping[instr] = fusion.operands[instr.parameter_number]
            continue
        c = Instruction(instr.opcode, instr.shape, [mapping[o] for o in instr.operands], "",
                        dict(instr.attrs))
        c.literal = instr.literal
        parent.add_instruction(c, instr.name)
        mapping[instr] = c
        if added is not None:
            added.append(c)
    root = mapping[body.root]
    if "metadata" in fusion.attrs and "metadata" not in root.attrs:
        root.attrs["metadata"] = fusion.attrs["metadata"]
    parent.replace_instruction(fusion, root)
    return root


def _adopt_fused_computations(added: list[Instruction]) -> None:
    """Move the fused computations of fusions made in the scratch module
    into the caller's module, under names unique there."""
    if not added:
        return
    caller = added[0].parent
    module = caller.module if caller is not None else None
    if module is None:
        return
    seen: set[int] = set()
    stack = [c for i in added if i.opcode == "fusion" for c in i.called_computations()]
    while stack:
        comp = stack.pop()
        if id(comp) in seen or comp.module is module:
            continue
        seen.add(id(comp))
        old = comp.module
        if old is not None and old is not module:
            old.remove_computation(comp)
        comp.name = module.unique_name(comp.name)
        for i in comp.instructions:
            i.name = module.unique_name(i.name)
        module.insert_computation_before(comp, caller)
        stack.extend(c for i in comp.instructions for c in i.called_computations()
                     if c.module is old)


def set_blas_algorithm(call: Instruction, algorithm: int) -> None:
    """XLA's CublasLtBackend::ApplyConfig: the chosen algorithm and the
    workspace it was profiled with."""
    from ..passes.gemm_rewriter.config import read_gemm_config, write_gemm_config
    g = read_gemm_config(call)
    g["selected_algorithm"] = str(algorithm)
    ws = call.shape.tuple_shapes[-1] if call.shape.is_tuple else None
    if (call.custom_call_target or "").startswith("__cublas$lt$") and ws is not None \
            and ws.element_type == "s8":
        g["autotune_workspace_size"] = str(ws.byte_size())
    write_gemm_config(call, g)


def find_blas_call(instrs) -> Instruction | None:
    for i in instrs:
        if i.opcode == "custom-call" and (i.custom_call_target or "").startswith("__cublas$"):
            return i
    return None


def find_blas_calls(instrs) -> list[Instruction]:
    return [i for i in instrs
            if i.opcode == "custom-call" and (i.custom_call_target or "").startswith("__cublas$")]


def fission_to_blas(fusion: Instruction, library: str, algorithm: int, target: Target,
                    pin_output_layout: bool = True, size_threshold: int = 100) -> Instruction:
    """Replace a GEMM fusion by the BLAS library call (plus whatever of its
    prologue/epilogue the rewriter did not absorb).  Returns the call."""
    from ..passes.dot_algorithm_rewriter import DotAlgorithmRewriter
    from ..passes.gemm_rewriter import GemmRewriter

    lib = LIBRARIES[library]
    comp = fusion.fused_computation
    if comp is None:
        raise PassError(f"{fusion.name} has no fused computation", instruction=fusion.name)
    scratch = Module(f"{fusion.name}_fission")
    body = _clone_computation(comp, scratch, comp.name)
    # XLA's FissionToCublas runs DotAlgorithmRewriter before the GEMM
    # rewriter: a BF16_BF16_F32_X3/X6/X9 or TF32_TF32_F32_X3 dot becomes the
    # 3/6/9/3 plain GEMMs (and the operand splits) cuBLAS can run.
    DotAlgorithmRewriter().run(scratch)
    rewriter = GemmRewriter(target=target, cublaslt=lib.lt, pin_output_layout=False,
                            size_threshold=size_threshold)
    rewriter.run(scratch)
    calls = find_blas_calls(scratch.entry.instructions)
    if not calls:
        why = "; ".join(r.message for r in rewriter.remarks if r.kind == "missed") or "no dot rewritten"
        raise PassError(f"BLAS fission of {fusion.name} found no GEMM for {lib.label}: {why}",
                        instruction=fusion.name, computation=fusion.parent.name if fusion.parent else None)
    # XLA's FissionBackend::ApplyConfig applies the config to every library
    # call the fission made
    for call in calls:
        set_blas_algorithm(call, algorithm)
    # XLA's FissionBackend::ApplyConfig: the autotuner runs after fusion, so
    # priority fusion runs again on the fissioned module to fuse what the
    # rewriter left of the prologue / epilogue, before it is inlined.
    from ..passes.priority_fusion import PriorityFusion
    PriorityFusion(target=target).run(scratch)
    body = scratch.entry
    new_instrs: list[Instruction] = []  # not a scan of the caller: O(GEMM), not O(module)
    _inline(fusion, body, new_instrs)
    _adopt_fused_computations(new_instrs)
    calls = find_blas_calls(new_instrs)
    if pin_output_layout:
        for call in calls:
            _pin(call, target)
    return calls[-1] if calls else None


def _pin(call: Instruction, target: Target) -> None:
    """Pin the call's GEMM output to the canonical layout, using the
    rewriter's own rule for which users then need a copy back."""
    from ..passes.gemm_rewriter import GemmRewriter
    from ..passes.gemm_rewriter.config import Gpu
    from ..passes.gemm_rewriter.rewriter import GemmRewriterVisitor, Options
    from ..ir.shape import Shape

    owner = GemmRewriter(target=target, pin_output_layout=True)
    v = GemmRewriterVisitor(owner, Gpu.from_target(target),
                            Options(fp8_only=False, bias=True, cublaslt=True, pin_output_layout=True,
                                    size_threshold=0))
    if call.shape.is_tuple:
        out = [u for u in call.users if u.opcode == "get-tuple-element" and u.tuple_index == 0]
        first = call.shape.tuple_shapes[0]
        pinned = v.pinned(first)
        if pinned == first:
            return
        call.shape = Shape.tuple([pinned] + list(call.shape.tuple_shapes[1:]))
        for g in out:
            original = g.shape
            g.shape = pinned
            v.fix_pinned_users(g, original)
    else:
        original = call.shape
        pinned = v.pinned(original)
        if pinned == original:
            return
        call.shape = pinned
        v.fix_pinned_users(call, original)
