"""``autotuner``: XLA's GEMM autotuner (AutotunerPass with the Triton and
BLAS-fission backends), deterministic and explainable.

For every ``__triton_gemm`` fusion: build the candidates (XLA's Triton
config space, each with its shared memory and registers, rejected with a
reason when over a device limit; the BLAS library's algorithms, with the
canonical-output-layout restriction), estimate each feasible one with the
cost model, choose (``mode: model``; or ``mode: noisy`` -- simulated
measurements under ``contention`` with ``sampling: xla`` or ``fair``),
and apply the winner as XLA does: ``triton_gemm_config`` in the fusion's
backend config, or fission to the BLAS custom call (output pinned to the
canonical layout).  A decision can also come from ``force_backend``, the
JSON ``cache`` or XLA's ``xla_results`` file.

Options may be set on the step or in the pipeline's ``autotune:`` section
(the step wins).  Each decision is a ``record("autotune", ...)`` (the
JSON report's ``autotune`` list) and a remark.

Postcondition: no ``__triton_gemm`` fusion is left without a
``triton_gemm_config``; fissioned GEMMs are BLAS custom calls.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ...autotune import blas as B
from ...autotune.apply import apply_triton, fission_to_blas
from ...autotune.cache import Cache, CachedChoice, XlaResults, gemm_key
from ...autotune.candidates import (TRITON, Candidate, blas_candidates, triton_candidate,
                                    triton_candidates)
from ...autotune.devices import DeviceSpec, get_device
from ...autotune.force import (Force, Infeasible, check_patterns, force_for, parse_force,
                               resolve_backend)
from ...autotune.problem import (GemmProblem, find_dot, gemm_problem, is_blas_call,
                                       is_triton_gemm_fusion)
from ...autotune.select import Decision, decide, model_pick, runner_up
from ...ir.module import Instruction, Module
from ...errors import PassError, UsageError
from ..base import Pass, Target

MODES = ("model", "noisy")


def _problem_key(p: GemmProblem) -> tuple:
    """Everything of ``p`` the candidates can depend on (all but its name)."""
    return tuple(getattr(p, f.name) if f.name != "epilogue_operands" else
                 tuple((e.name, e.shape, e.kind, e.transposed) for e in p.epilogue_operands)
                 for f in fields(p) if f.name != "name")
SAMPLINGS = ("xla", "fair", "each")


@dataclass(frozen=True)
class Autotuner(Pass):
    """Pick a Triton config or a BLAS library for every GEMM fusion (cost model, noise, cache, forced backends)."""

    name = "autotuner"
    mode: str = "model"
    seed: int = 0
    contention: str = "none"
    sampling: str = "xla"
    flip_seeds: int = 20
    fair_samples: int = 15
    device: str = ""
    blas: str = "auto"
    exhaustive: bool = False
    split_k: bool = False
    force_backend: str = ""
    force_strict: bool = False
    cache: str = ""
    xla_results: str = ""
    pin_blas_output_layout: bool = True
    size_threshold: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in MODES:
            raise UsageError(f"autotuner: mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if self.sampling not in SAMPLINGS:
            raise UsageError(f"autotuner: sampling must be one of {', '.join(SAMPLINGS)} (got {self.sampling!r})")
        if self.blas not in ("auto", "all", "none") + tuple(B.LIBRARIES):
            raise UsageError(f"autotuner: blas must be auto, all, none or one of {', '.join(B.LIBRARIES)}")
        from ...autotune.select import contention_sigma
        contention_sigma(self.contention)
        object.__setattr__(self, "forces", parse_force(self.force_backend))
        object.__setattr__(self, "decisions", [])
        object.__setattr__(self, "infeasible", [])

    @classmethod
    def from_pipeline(cls, spec: Any, options: dict[str, Any], target: Target) -> "Autotuner":
        """Options from the pipeline's ``autotune:`` section, then the step's."""
        merged: dict[str, Any] = {}
        section = spec.section("autotune", None) if spec is not None else None
        known = {f.name for f in fields(cls)} - {"target"}
        if isinstance(section, dict):
            for k, v in section.items():
                key = str(k).replace("-", "_")
                if key in known:
                    merged[key] = v
        merged.update(options)
        return cls(target=target, **merged)

    # -- helpers --------------------------------------------------------------------
    def device_spec(self) -> DeviceSpec:
        return get_device(self.device or self.target.device)

    def blas_target(self, d: DeviceSpec) -> Target:
        return Target(d.platform, d.name, d.arch)

    def libraries(self, d: DeviceSpec) -> list[str]:
        if self.blas == "none":
            return []
        if self.blas == "all":
            return list(d.blas_libraries)
        if self.blas == "auto":
            lib = B.default_library(d)
            return [lib] if lib else []
        return [self.blas]

    def gemm_fusions(self, module: Module) -> list[Instruction]:
        called = set()
        for comp in module.computations:
            for i in comp.instructions:
                if i.opcode == "fusion" and i.fused_computation is not None:
                    called.add(i.fused_computation)
        out = []
        for comp in module.computation_post_order():
            if comp in called:
                continue
            out.extend(i for i in comp.post_order() if is_triton_gemm_fusion(i) or is_blas_call(i))
        return out

    def _blas(self, lib: str, g: Instruction, dot: Instruction, p: GemmProblem,
              d: DeviceSpec) -> list[Candidate]:
        from ..gemm_rewriter.matmul import (cublas_support_reason, supported_by_classical_emitters,
                                            too_small_for_rewriting)
        why = cublas_support_reason(dot)
        if why is None and too_small_for_rewriting(dot, self.size_threshold) \
                and supported_by_classical_emitters(dot):
            why = f"(m+n)*k below the rewrite size threshold {self.size_threshold}: the fission finds no GEMM"
        if why is not None:
            return [Candidate(lib, reasons=[f"{B.LIBRARIES[lib].label}: {why}"])]
        return blas_candidates(lib, p, d)

    def call_library(self, call: Instruction, d: DeviceSpec) -> str:
        lt = (call.custom_call_target or "").startswith("__cublas$lt$")
        for lib in d.blas_libraries:
            if B.LIBRARIES[lib].lt == lt:
                return lib
        return "hipblaslt" if d.is_rocm and lt else ("rocblas" if d.is_rocm else ("cublaslt" if lt else "cublas"))

    def candidates(self, g: Instruction, p: GemmProblem, d: DeviceSpec, force: Force | None) -> list[Candidate]:
        if is_blas_call(g):
            # an existing library call: only its library's algorithms (XLA's
            # CublasLtBackend / GemmAlgorithmPicker)
            lib = self.call_library(g, d)
            cands = blas_candidates(lib, p, d)
            if force is not None and force.backend not in (lib,):
                raise PassError(f"{g.name} is already a {B.LIBRARIES[lib].label} call; "
                                f"--force-backend {force.text} cannot apply", instruction=g.name)
            if force is not None and force.algorithm is not None:
                hit = [c for c in cands if c.algorithm is not None and c.algorithm.index == force.algorithm]
                if not hit:
                    raise PassError(f"{g.name}: forced {force.text}, but {B.LIBRARIES[lib].label} offers "
                                    f"algorithms 0..{len(cands) - 1}", instruction=g.name)
                hit[0].forced = True
                return hit
            return cands
        dot = find_dot(g.fused_computation)
        cands: list[Candidate] = []
        if force is not None and force.backend == TRITON:
            if force.config is not None:
                return [triton_candidate(force.config, p, d, forced=True)]
            return triton_candidates(p, d, exhaustive=self.exhaustive, split_k=self.split_k)
        if force is not None:
            blas = self._blas(force.backend, g, dot, p, d)
            if force.algorithm is not None and blas and blas[0].feasible:
                hit = [c for c in blas if c.algorithm.index == force.algorithm]
                if not hit:
                    raise PassError(f"{g.name}: forced {force.text}, but {B.LIBRARIES[force.backend].label} "
                                    f"offers algorithms 0..{len(blas) - 1}", instruction=g.name)
                hit[0].forced = True
                return hit
            return blas
        cands.extend(triton_candidates(p, d, exhaustive=self.exhaustive, split_k=self.split_k))
        for lib in self.libraries(d):
            cands.extend(self._blas(lib, g, dot, p, d))
        return cands

    # -- the pass ----------------------------------------------------------------------
    def run(self, module: Module) -> bool:
        d = self.device_spec()
        gemms = self.gemm_fusions(module)
        try:
            check_patterns(self.forces, [self.gemm_names(g) for g in gemms])
        except UsageError as e:  # a typo in INSTR=: the pass cannot do what was asked
            raise PassError(str(e)) from None
        self.infeasible.clear()
        cache = Cache(self.cache or None)
        xres = XlaResults.load(self.xla_results) if self.xla_results else None
        if xres is not None:
            xres.match(gemms)
            self.remark(None, f"XLA autotune results {self.xla_results}: {len(xres.entries)} entries, "
                              f"{len(xres.gemm_entries)} GEMM, matched {len(xres.matched)} ({xres.how})",
                        kind="analysis", **xres.summary())
        callers: dict[Any, int] = {}
        for comp in module.computations:
            for i in comp.instructions:
                if i.attrs:
                    for c in i.called_computations():
                        callers[c] = callers.get(c, 0) + 1
        object.__setattr__(self, "_callers", callers)
        # per run: candidates by GEMM identity, candidates' JSON by candidate
        object.__setattr__(self, "_memo", {})
        object.__setattr__(self, "_json", {})
        changed = False
        try:
            for g in gemms:
                changed |= self.tune(g, d, cache, xres)
        finally:
            self._memo.clear()
            self._json.clear()
            # computations the run saw (some are removed later): not kept alive
            object.__setattr__(self, "_callers", {})
        cache.save()
        if self.infeasible:
            forced = sum(1 for dec in self.decisions if dec.source == "forced")
            self.remark(None, f"--force-backend: forced {forced} of {len(gemms)} GEMMs; "
                              f"{len(self.infeasible)} could not take it: "
                              + " | ".join(x.text() for x in self.infeasible), kind="analysis",
                        forced=forced, infeasible=[x.to_json() for x in self.infeasible])
        return changed

    @staticmethod
    def gemm_names(g: Instruction) -> tuple[str, ...]:
        """The names ``INSTR=`` of --force-backend may use for this GEMM."""
        dot = find_dot(g.fused_computation) if g.opcode == "fusion" else None
        return (g.name, dot.name if dot else "", g.name.removeprefix("gemm_fusion_"))

    def forced_candidates(self, g: Instruction, p: GemmProblem, d: DeviceSpec,
                          force: Force) -> tuple[list[Candidate], list[str]]:
        """The candidates ``force`` allows, and why none is feasible (empty
        when one is)."""
        try:
            cands = self.candidates(g, p, d, force)
        except PassError as e:
            return [], [e.message]
        if any(c.feasible for c in cands):
            return cands, []
        reasons = []
        for c in [c for c in cands if c.reasons][:4]:
            r = "; ".join(c.reasons)
            if c.config is not None:
                r = f"{c.label}: {r}"
            if c.hypothetical is not None and p.flops:
                r += (f" (had it fit: {c.hypothetical.ns / 1e3:.1f} us, "
                      f"{p.flops / c.hypothetical.ns / 1e3:.0f} TFLOP/s)")
            reasons.append(r)
        reasons = list(dict.fromkeys(reasons))
        return cands, reasons or [f"{force.backend} offers no algorithm for this GEMM"]

    def shared_candidates(self, g: Instruction, p: GemmProblem, d: DeviceSpec,
                          key: str) -> list[Candidate]:
        """``candidates(g, p, d, None)``, memoised for the run: GEMMs with
        the same canonical body and problem (every layer of a transformer)
        get the same candidates, computed once.  The list is fresh; the
        candidates are shared (read-only from here on)."""
        memo = getattr(self, "_memo", None)
        if memo is None:
            return self.candidates(g, p, d, None)
        mk = (key, g.opcode, g.custom_call_target, _problem_key(p))
        got = memo.get(mk)
        if got is None:
            got = memo[mk] = self.candidates(g, p, d, None)
        return list(got)

    def tune(self, g: Instruction, d: DeviceSpec, cache: Cache, xres: XlaResults | None) -> bool:
        p = gemm_problem(g)
        dot = find_dot(g.fused_computation) if g.opcode == "fusion" else None
        force = force_for(self.forces, self.gemm_names(g))
        infeasible = None
        if force is not None:
            if force.backend != resolve_backend(force.backend, d.is_rocm):
                force = Force(force.pattern, resolve_backend(force.backend, d.is_rocm),
                              force.config, force.algorithm)
            cands, why = self.forced_candidates(g, p, d, force)
            if why:
                infeasible = Infeasible(g.name, f"--force-backend {force.text}",
                                        f"{p.shape_text} {p.types_text}", why)
                # A force naming this GEMM (INSTR=...) asked for exactly this and
                # fails (S4: the config that cannot run, with its figures); a
                # global force is best effort unless force_strict.
                if self.force_strict or force.pattern is not None:
                    raise PassError(infeasible.text() + (" (--force-backend-strict)"
                                                         if force.pattern is None else ""),
                                    instruction=g.name,
                                    computation=g.parent.name if g.parent else None)
                force = None  # autotune this one as if nothing were forced
                cands = self.candidates(g, p, d, None)
        else:
            cands = None
        key = gemm_key(g, d.name)
        if cands is None:
            cands = self.shared_candidates(g, p, d, key)
        dec = None
        xla_note = None
        if force is None:
            dec = self._replay(g, p, d, cands, cache.get(key), "cache")
            if dec is None and xres is not None and g.name in xres.matched:
                dec = self._replay_xla(g, p, d, cands, xres.matched[g.name])
                if dec is not None and g.name in xres.bound_by:
                    dec.notes.append(f"XLA's entry bound by {xres.bound_by[g.name]}")
                if dec is None:
                    xla_note = self._xla_not_replayed(g, d, xres.matched[g.name])
        if dec is None:
            dec = decide(g.name, cands, mode=self.mode, seed=self.seed, contention=self.contention,
                         sampling=self.sampling, flip_seeds=self.flip_seeds,
                         fair_samples=self.fair_samples, problem=p)
            if force is not None:
                dec.source = "forced"
                dec.notes.append(f"--force-backend {force.text}")
            if xla_note:
                dec.notes.append(xla_note)
        if dec.winner is None:
            reasons = []
            for c in [c for c in cands if c.reasons][:4]:
                r = f"{c.label}: {'; '.join(c.reasons)}"
                if c.hypothetical is not None and p.flops:
                    r += (f" (had it fit: {c.hypothetical.ns / 1e3:.1f} us, "
                          f"{p.flops / c.hypothetical.ns / 1e3:.0f} TFLOP/s)")
                reasons.append(r)
            what = f"forced {force.text}" if force is not None else "every candidate"
            raise PassError(f"{g.name} [{p.shape_text} {p.types_text}] on {d.name}: {what} rejected: "
                            + " | ".join(reasons), instruction=g.name,
                            computation=g.parent.name if g.parent else None)
        if infeasible is not None:
            infeasible.instead = dec.winner.label
            self.infeasible.append(infeasible)
            dec.notes.append(infeasible.text())
            self.remark(g, infeasible.text(), kind="missed", reasons=infeasible.reasons)
        cache.put(key, CachedChoice(dec.winner.backend, dec.winner.config,
                                    dec.winner.algorithm.index if dec.winner.algorithm else None,
                                    {"instruction": g.name, "device": d.name, "shape": p.shape_text,
                                     "types": p.types_text, "estimate_ns": round(dec.winner.ns, 1)}))
        self.decisions.append(dec)
        self._record(dict(device=d.name, **dec.to_json(self._candidate_json),
                          **({"force_infeasible": infeasible.to_json()} if infeasible else {})))
        self.remark(g, self.summary(dec, d), kind="applied", derived_from=[dot] if dot else [],
                    backend=dec.winner.backend, winner=dec.winner.label)
        for c in dec.rejected:
            self.remark(g, f"rejected {c.label}: {'; '.join(c.reasons)}", kind="missed")
        return self.apply(g, dec.winner, d)

    def _candidate_json(self, c: Candidate) -> dict[str, Any]:
        """``c.to_json()``, once per shared candidate in a run (records of
        GEMMs with the same candidates share these read-only dicts)."""
        memo = getattr(self, "_json", None)
        if memo is None:
            return c.to_json()
        got = memo.get(id(c))
        if got is None or got[0] is not c:
            got = memo[id(c)] = (c, c.to_json())
        return got[1]

    def _record(self, data: dict[str, Any]) -> None:
        record = getattr(self, "record", None)   # Pass.record (pass manager), when present
        if record is not None:
            record("autotune", **data)
        else:
            if not hasattr(self, "records"):
                object.__setattr__(self, "records", [])
            self.records.append(("autotune", data))

    def _replay(self, g, p, d, cands, choice: CachedChoice | None, source: str) -> Decision | None:
        if choice is None:
            return None
        hit = None
        for c in cands:
            if c.backend != choice.backend:
                continue
            if choice.config is not None and c.config == choice.config:
                hit = c
            elif choice.config is None and c.algorithm is not None and c.algorithm.index == (choice.algorithm or 0):
                hit = c
        if hit is None and choice.config is not None and not is_blas_call(g):
            hit = triton_candidate(choice.config, p, d)
            cands.append(hit)
        if hit is None or not hit.feasible:
            self.remark(g, f"{source} entry {choice.backend} not usable on {d.name}"
                           + (f": {'; '.join(hit.reasons)}" if hit is not None else ""), kind="missed")
            return None
        dec = Decision(g.name, cands, hit, source=source, problem=p, model_winner=model_pick(cands))
        dec.runner_up = runner_up(cands, hit)
        if dec.runner_up is not None:
            dec.margin = (dec.runner_up.ns - hit.ns) / hit.ns
        return dec

    def _replay_xla(self, g, p, d, cands, entry) -> Decision | None:
        cfg = entry.config
        lib = cfg.backend
        if lib != TRITON and lib not in d.blas_libraries:
            # XLA's CUBLASLT on ROCm is hipBLASLt (same custom call target)
            lib = B.default_library(d) or lib
        dec = self._replay(g, p, d, cands, CachedChoice(lib, cfg.triton, cfg.algorithm), "xla-results")
        if dec is not None:
            dec.notes.append(f"XLA chose {cfg.xla_backend} {cfg.label} (device {entry.device})")
        return dec

    def _xla_not_replayed(self, g: Instruction, d: DeviceSpec, entry) -> str:
        """Why XLA's entry for ``g`` was not replayed (said in the decision's
        notes, so the report never shows a backend the module does not
        carry).  An existing library call cannot become a Triton fusion:
        XLA's Triton choice means XLA's GemmFusion took a GEMM that this
        pipeline handed to the BLAS rewriter first (scenario S3)."""
        cfg = entry.config
        if is_blas_call(g) and cfg.backend != self.call_library(g, d):
            note = (f"XLA chose {cfg.xla_backend} {cfg.label}, but {g.name} is already a "
                    f"{B.LIBRARIES[self.call_library(g, d)].label} call ({g.custom_call_target}) "
                    "here: the GEMM rewriter took it before GEMM fusion, so only its "
                    "library's algorithms are autotuned")
        else:
            note = f"XLA chose {cfg.xla_backend} {cfg.label}, which is not usable here on {d.name}"
        self.remark(g, note, kind="missed")
        return note

    def summary(self, dec: Decision, d: DeviceSpec) -> str:
        p = dec.problem
        w = dec.winner
        s = f"[{p.shape_text} {p.types_text}] on {d.name}: {w.label} ({w.ns / 1e3:.2f} us, {dec.source})"
        if dec.runner_up is not None:
            s += f" over {dec.runner_up.label} ({dec.runner_up.ns / 1e3:.2f} us, margin {dec.margin:+.1%})"
            if dec.margin is not None and dec.margin < 0 and w.scratch_bytes < dec.runner_up.scratch_bytes:
                s += " (XLA's rule: within 2 us of the fastest, needs no scratch memory)"
        if dec.flip_rate is not None:
            s += f"; flips in {dec.flip_rate:.0%} of {dec.flip_seeds} seeds"
        rc = dec.rejection_cost()
        if rc is not None:
            s += (f"; rejected {rc['label']} would have been {rc['slowdown']:.0%} faster "
                  f"({rc['reasons'][0].split(' [')[0]})")
        s += f"; {len(dec.feasible)} feasible, {len(dec.rejected)} rejected of {len(dec.candidates)}"
        if w.estimate is not None:
            from ...autotune.cost import params_for
            s += f"; winner {w.estimate.why()} [cost constants: {params_for(d).source}]"
        return s

    def apply(self, g: Instruction, w: Candidate, d: DeviceSpec) -> bool:
        if is_blas_call(g):
            from ...autotune.apply import set_blas_algorithm
            before = g.attrs.get("backend_config")
            set_blas_algorithm(g, w.algorithm.index if w.algorithm else 0)
            return g.attrs.get("backend_config") != before
        if w.backend == TRITON:
            before = g.attrs.get("backend_config")
            apply_triton(g, w.config)
            return g.attrs.get("backend_config") != before
        comp = g.fused_computation
        module = g.parent.module if g.parent is not None else None
        fission_to_blas(g, w.backend, w.algorithm.index if w.algorithm else 0, self.blas_target(d),
                        pin_output_layout=self.pin_blas_output_layout, size_threshold=self.size_threshold)
        callers = getattr(self, "_callers", {})
        if module is not None and comp is not None and callers.get(comp, 1) <= 1:
            module.remove_computation(comp)
        return True


__all__ = ["Autotuner"]
