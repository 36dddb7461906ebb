"""Reading XLA dump directories (``--xla_dump_to`` with
``--xla_dump_hlo_as_text --xla_dump_hlo_pass_re=...``) as a pass timeline.

A dump directory holds, per module ``module_NNNN.NAME``:
``before_optimizations.txt``, numbered steps
``SSSS.<pipeline>.after_<pass>.before_<next>.txt`` (or, from inside a pass,
``SSSS.<pass>.<step>.txt``), and ``<prefix>_gpu_after_optimizations.txt``
(also ``cpu_after_optimizations.txt``).  :func:`scan` finds the modules;
:func:`replay_module` orders the steps by sequence number and turns each into
a :class:`ReplayStep`: what changed between the previous file and this one
(the pass named ``after_<pass>``), with instruction counts and per-step
diffs.  A directory without step files (only before/after optimizations)
replays as a single step, XLA's whole pipeline; a directory of dump
directories replays each of them.  Other files (buffer assignment, thunk
sequences, ``after_spmd_partitioner.txt`` ...) are not HLO steps and are
skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

_MODULE = re.compile(r"^module_(?P<id>\d+)\.(?P<rest>.+)\.txt$")
_STEP = re.compile(r"^(?P<seq>\d{4,})\.(?P<body>.+)$")
_AFTER_OPT = re.compile(r"^(?:(?P<prefix>.+)_gpu_|cpu_)?after_optimizations$")


@dataclass
class DumpFile:
    path: Path
    kind: str  # "before", "step", "after"
    seq: int = -1
    pipeline: str = ""
    after: str = ""
    before: str = ""


@dataclass
class DumpModule:
    """One module's files in a dump directory."""

    module_id: str
    name: str
    directory: Path
    before: DumpFile | None = None
    steps: list[DumpFile] = field(default_factory=list)
    after: DumpFile | None = None

    @property
    def label(self) -> str:
        return f"module_{self.module_id}.{self.name}"

    def files(self) -> list[DumpFile]:
        out = [self.before] if self.before else []
        out.extend(sorted(self.steps, key=lambda f: f.seq))
        if self.after:
            out.append(self.after)
        return out


@dataclass
class ReplayStep:
    index: int  # 1-based
    seq: int | None  # XLA's dump step number
    pipeline: str
    name: str  # the pass (after_<name>), "pipeline-start", or "xla"
    next_name: str
    file: str
    changed: bool
    instructions_before: int
    instructions_after: int
    diff: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"{self.pipeline}/{self.name}" if self.pipeline else self.name

    def to_json(self) -> dict:
        return {"index": self.index, "seq": self.seq, "pipeline": self.pipeline,
                "name": self.name, "path": self.path, "next": self.next_name,
                "file": self.file, "changed": self.changed,
                "instructions_before": self.instructions_before,
                "instructions_after": self.instructions_after,
                "diff_lines": len(self.diff)}


def _split_step(body: str) -> tuple[str, str, str]:
    """(pipeline, after, before) of ``<pipeline>.after_<a>.before_<b>`` or
    ``<pass>.<step>`` (a dump from inside a pass)."""
    if ".after_" in body:
        pipeline, rest = body.split(".after_", 1)
        if ".before_" in rest:
            after, before = rest.rsplit(".before_", 1)
            return pipeline, after, before
        return pipeline, rest, ""
    if "." in body:
        p, s = body.split(".", 1)
        return p, s, ""
    return body, body, ""


def scan(directory: str | Path) -> list[DumpModule]:
    """The modules dumped in ``directory`` (not recursive)."""
    d = Path(directory)
    names: dict[str, str] = {}
    files = sorted(p for p in d.iterdir() if p.is_file() and p.name.startswith("module_"))
    # Module names come from before_optimizations / step files.
    for p in files:
        m = _MODULE.match(p.name)
        if not m:
            continue
        rest = m.group("rest")
        if rest.endswith(".before_optimizations"):
            names.setdefault(m.group("id"), rest[: -len(".before_optimizations")])
        else:
            sm = re.match(r"^(?P<name>.+?)\.\d{4,}\.", rest)
            if sm:
                names.setdefault(m.group("id"), sm.group("name"))
    mods: dict[str, DumpModule] = {}
    for p in files:
        m = _MODULE.match(p.name)
        if not m:
            continue
        mid = m.group("id")
        name = names.get(mid)
        rest = m.group("rest")
        if name is None:
            am = re.match(r"^(?P<name>.+)\.(?P<sfx>[^.]*after_optimizations)$", rest)
            if not am:
                continue
            name = names[mid] = am.group("name")
        if not rest.startswith(name + "."):
            continue
        body = rest[len(name) + 1:]
        mod = mods.setdefault(mid, DumpModule(mid, name, d))
        if body == "before_optimizations":
            mod.before = DumpFile(p, "before")
        elif _AFTER_OPT.match(body) or (body.endswith("after_optimizations")
                                         and "." not in body.replace("sm_", "").replace(".", "", 1)):
            mod.after = DumpFile(p, "after")
        else:
            sm = _STEP.match(body)
            if sm:
                pipe, after, before = _split_step(sm.group("body"))
                mod.steps.append(DumpFile(p, "step", int(sm.group("seq")), pipe, after, before))
    return [mods[k] for k in sorted(mods, key=lambda x: int(x))]


def dump_dirs(directory: str | Path) -> list[Path]:
    """``directory`` itself if it holds module dumps, else its
    subdirectories that do (one level, sorted)."""
    d = Path(directory)
    if any(_MODULE.match(p.name) for p in d.iterdir() if p.is_file()):
        return [d]
    return [s for s in sorted(d.iterdir()) if s.is_dir()
            and any(_MODULE.match(p.name) for p in s.iterdir() if p.is_file())]


def replay_module(mod: DumpModule, diffs: bool = True, form: str = "diff",
                  diff_filter: re.Pattern | None = None, all_steps: bool = False
                  ) -> Iterator[ReplayStep]:
    """Yield one ReplayStep per dump file after the first, in order."""
    from ..report.diffs import diff_snapshots, snapshot
    from ..text.parser import load_module
    files = mod.files()
    if not files:
        return
    prev_mod = load_module(files[0].path)
    prev = snapshot(prev_mod, form)
    prev_full = snapshot(prev_mod, "full") if form != "full" else prev
    prev_count = prev_mod.instruction_count
    index = 0
    for f in files[1:]:
        m = load_module(f.path)
        snap = snapshot(m, form)
        full = snapshot(m, "full") if form != "full" else snap
        changed = full != prev_full
        if f.kind == "after":
            pipeline, name, nxt = ("", "xla" if not mod.steps else "after_optimizations", "")
        else:
            pipeline, name, nxt = f.pipeline, f.after, f.before
        index += 1
        step = ReplayStep(index, f.seq if f.kind == "step" else None, pipeline, name, nxt,
                          f.path.name, changed, prev_count, m.instruction_count)
        want = diffs and (changed or all_steps)
        if want and (diff_filter is None or diff_filter.search(step.path)):
            step.diff = diff_snapshots(prev, snap) if changed else []
            if changed and not step.diff:
                step.diff = [f"(only metadata, backend configs or stack frames changed: "
                             f"--diff-form full shows them)"]
        yield step
        prev, prev_full, prev_count = snap, full, m.instruction_count
