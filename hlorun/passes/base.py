"""The pass contract.

A pass is a frozen dataclass whose fields are its options (set from pipeline
YAML); ``run(module)`` mutates the module in place and returns True iff it
changed anything.  Passes never print, dump, time or verify: the pipeline
does that around them.  What a pass decided and why goes into
``self.remarks`` (``self.remark(...)``), which the pipeline collects after
``run`` for ``--explain`` and the JSON report.

Target facts (platform, device, libraries) come in as ``self.target``, a
:class:`Target`, never from globals or the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable

from ..ir.module import Computation, Instruction, Module
from ..errors import PassError
from .remark import Remark
from .remark_log import RemarkLog


@dataclass(frozen=True)
class Target:
    """What the compiler compiles for.  ``platform``: "cuda", "rocm",
    "sycl" or "cpu"; ``device``: a device name known to
    ``hlorun.autotune.devices`` (e.g. "H100"); ``compute_capability``:
    "9.0" for CUDA, "gfx942" for ROCm."""

    platform: str = "cuda"
    device: str = "H100"
    compute_capability: str = "9.0"

    @property
    def is_rocm(self) -> bool:
        return self.platform == "rocm"

    @property
    def is_cuda(self) -> bool:
        return self.platform == "cuda"

    @property
    def cc_version(self) -> tuple[int, int]:
        """The CUDA compute capability as (major, minor); (0, 0) when it is
        not a CUDA version string (ROCm's "gfx942")."""
        major, _, minor = self.compute_capability.partition(".")
        try:
            return int(major), int(minor or 0)
        except ValueError:
            return (0, 0)


@dataclass(frozen=True)
class Pass:
    """Base class for passes.  Subclasses: ``name = "xla-name"`` (class
    variable), option fields, and ``run``."""

    name: ClassVar[str] = ""
    target: Target = field(default_factory=Target, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "remarks", RemarkLog())  # reads like a list of Remark
        object.__setattr__(self, "records", [])

    # -- contract -------------------------------------------------------------
    def run(self, module: Module) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def converged(self, module: Module) -> bool:
        """True when running again on ``module``, exactly as this pass's
        previous ``run`` left it, is known to change nothing (its run
        already reached a fixed point there).  A fixed-point step then
        counts the rerun without running it.  Default: unknown (False)."""
        return False

    # -- helpers ---------------------------------------------------------------
    def remark(self, instr: Instruction | str | None, message: str, kind: str = "applied",
               derived_from: Iterable[Instruction | str] = (), **data: Any) -> None:
        name = instr.name if isinstance(instr, Instruction) else instr
        self.remarks.append(Remark(self.name, name, message, kind, data,
                                   tuple([d.name if isinstance(d, Instruction) else d
                                          for d in derived_from])))

    def record(self, section: str, **data: Any) -> None:
        """A structured decision for a report section (e.g. ``"autotune"``:
        one candidate choice); the pipeline collects these after ``run`` and
        ``compile --format json`` lists them under that section's key."""
        self.records.append((section, dict(data)))

    def fail(self, message: str, instr: Instruction | None = None) -> None:
        raise PassError(message, instruction=instr.name if instr else None,
                        computation=instr.parent.name if instr is not None and instr.parent else None)

    @classmethod
    def option_fields(cls) -> list:
        """The YAML-settable options: dataclass fields other than target."""
        return [f for f in fields(cls) if f.name != "target"]

    @classmethod
    def doc_line(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


@dataclass(frozen=True)
class OpcodeRewriter(Pass):
    """A pass that visits every instruction (computations callees-first,
    instructions in post order) and dispatches ``handle_<opcode>`` with
    '-' mapped to '_' (``handle_reshape``, ``handle_custom_call``).  A
    handler returns True if it changed something.  Override
    ``computations`` to restrict which computations are visited."""

    def computations(self, module: Module) -> list[Computation]:
        return module.computation_post_order()

    def run(self, module: Module) -> bool:
        changed = False
        cache: dict[str, Any] = {}
        for comp in self.computations(module):
            for instr in comp.post_order():
                if instr.parent is not comp:
                    continue  # removed by an earlier rewrite
                handler = cache.get(instr.opcode)
                if handler is None:
                    handler = getattr(self, "handle_" + instr.opcode.replace("-", "_"), False)
                    cache[instr.opcode] = handler
                if handler and handler(instr):
                    changed = True
        return changed
