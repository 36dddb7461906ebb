"""``hlorun compile ... --bug-report report.tar.gz`` (or a directory): one
bundle an XLA maintainer can act on.

Contents (under ``hlorun-bug-report/`` in the archive)::

    README.md          what fails, the one-line reproducer, the XLA flags that correspond
    input.hlo          the module as given (absolute paths in metadata reduced to file names)
    reduced.hlo        with --reduce: the smallest module that still fails the same way
    pipeline.yaml      the effective pipeline (includes resolved, target overrides applied);
                       steps the command disabled are commented out, so it reproduces alone
    command.txt        the exact compile command, and the one that reproduces from the bundle
    failure.txt        the violation / pass failure text
    target.json        platform, device, compute capability
    autotune.json      autotuner decisions (when the pipeline autotunes), and its cache
    result.json        the compile's JSON report
    reduce.json        with --reduce: sizes, tests, time, flakiness
    versions.json      hlorun, Python, OS and package versions
    repro/             the single-pass reproducer (module before the culprit pass + pipeline)

Nothing inside names a local absolute path: paths are rewritten relative
to the bundle (or to their file name) before anything is written.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .fileio import read_text, write_atomic

ROOT = "hlorun-bug-report"
_ABS_QUOTED = re.compile(r'"(/[^"\n]*?)"')
#: An absolute path not under a known root (the last resort of Scrubber.text).
_ABS_PATH = re.compile(r"(?<![\w.~<>)\]/])/(?:[A-Za-z0-9_.+@-]+/)+([A-Za-z0-9_.+@-]*)")


# ---------------------------------------------------------------------------
# Paths out
# ---------------------------------------------------------------------------


class Scrubber:
    """Rewrites local absolute paths: the bundle's own staging directory
    becomes relative, the input's directory and the working directory
    vanish, and any other absolute path (a temporary directory, a home
    directory, an installed pipeline) keeps only its file name; quoted
    absolute paths in HLO metadata keep only their file name too."""

    def __init__(self, staging: Path | None, extra: Sequence[tuple[str, str]] = ()):
        roots: list[tuple[str, str]] = []
        if staging is not None:
            roots.append((str(staging.resolve()) + os.sep, ""))
            roots.append((str(staging.resolve()), "."))
        roots += list(extra)
        roots.append((str(Path.cwd().resolve()) + os.sep, ""))
        seen = set()
        self.roots = []
        for a, b in sorted(roots, key=lambda r: -len(r[0])):
            if a not in seen and len(a) > 1:
                seen.add(a)
                self.roots.append((a, b))

    def _roots(self, text: str) -> str:
        for a, b in self.roots:
            if a in text:
                text = text.replace(a, b)
        return text

    def text(self, text: str) -> str:
        """Known roots replaced, then any other absolute path down to its
        file name."""
        return _ABS_PATH.sub(lambda m: m.group(1) or ".", self._roots(text))

    def module(self, text: str) -> str:
        """HLO text: known roots replaced, then any remaining quoted
        absolute path (``source_file="/home/..."``) down to its file name."""
        return _ABS_QUOTED.sub(lambda m: '"' + m.group(1).rsplit("/", 1)[-1] + '"', self._roots(text))

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        return v


# ---------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------


def argv_from_params(command, params: dict[str, Any]) -> list[str]:
    """An argv equivalent to ``params`` for click ``command`` (defaults
    omitted), so options added to ``compile`` later are recorded too."""
    import click
    out: list[str] = []
    positional: list[str] = []
    for p in command.params:
        v = params.get(p.name)
        if isinstance(p, click.Argument):
            if v is not None:
                positional += [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
            continue
        if not isinstance(p, click.Option) or p.hidden and v in (None, False, ()):
            continue
        if v is None or v == p.default or (p.multiple and not v):
            continue
        name = max(p.opts, key=len)
        if p.is_flag and p.secondary_opts:
            out.append(name if v else max(p.secondary_opts, key=len))
        elif p.is_flag:
            if v:
                out.append(name)
        elif p.multiple:
            for x in v:
                out += [name] + ([str(y) for y in x] if isinstance(x, (list, tuple)) else [str(x)])
        elif isinstance(v, (list, tuple)):
            out += [name] + [str(x) for x in v]
        else:
            out += [name, str(v)]
    return positional + out


def pipeline_yaml(spec, selection) -> str:
    """The effective pipeline as YAML; disabled steps are commented out."""
    import yaml

    from .pipeline_spec import CheckStep, PipelineStep
    head = {k: v for k, v in spec.to_yaml().items() if k != "steps"}
    lines = ["# hlorun bug report: the effective pipeline (includes resolved, target overrides",
             "# applied); steps the command disabled are commented out.",
             yaml.safe_dump(head, sort_keys=False, default_flow_style=False).rstrip(), "steps:"]

    def emit(steps, indent: int, off: bool) -> None:
        pad = " " * indent
        for s in steps:
            dis = off or (not isinstance(s, CheckStep) and selection.is_disabled(s))
            c = "# " if dis else ""
            if isinstance(s, PipelineStep):
                d = s.to_yaml()
                d.pop("steps", None)
                first = True
                for k, v in d.items():
                    item = yaml.safe_dump({k: v}, default_flow_style=True, width=10_000).strip()
                    item = item[1:-1] if item.startswith("{") else item
                    lines.append(f"{pad}{c}{'- ' if first else '  '}{item}"
                                 + ("   # disabled by this command" if dis and first and not off else ""))
                    first = False
                lines.append(f"{pad}{c}  steps:")
                emit(s.steps, indent + 4, dis)
                continue
            text = yaml.safe_dump([s.to_yaml()], sort_keys=False, default_flow_style=False).rstrip()
            for k, ln in enumerate(text.splitlines()):
                lines.append(f"{pad}{c}{ln}" + ("   # disabled by this command"
                                                if dis and k == 0 and not off else ""))
    emit(spec.steps, 2, False)
    return "\n".join(lines) + "\n"


def versions() -> dict[str, Any]:
    import platform
    from importlib import metadata

    from . import __version__
    pkgs = {}
    for name in ("click", "lark", "rich", "numpy", "PyYAML", "ml_dtypes", "jax", "jaxlib"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {"hlorun": __version__, "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "os": f"{platform.system()} {platform.release()} {platform.machine()}",
            "packages": pkgs}


def failure_text(res) -> str:
    out = []
    if res.failure is not None:
        f = res.failure
        out.append(f"pass failure: pass #{f.index} {f.path} failed ({f.exception})")
        out.append(f"  {f.message}")
        if f.instruction:
            out.append(f"  instruction: {(f.computation + '/') if f.computation else ''}{f.instruction}")
    for v in res.violations:
        where = f"after #{v.pass_index} {v.after_pass}" if v.pass_index else "at pipeline start"
        if v.precondition_of:
            where = f"precondition of {v.precondition_of}, first violated {where}"
        out.append(f"violation [{v.rule}] {where}")
        if v.instruction:
            out.append(f"  instruction: {(v.computation + '/') if v.computation else ''}{v.instruction}")
        out.append(f"  {v.message}")
        if v.diagnostic is not None:
            out += [f"  note: {n}" for n in v.diagnostic.notes]
    return "\n".join(out) + ("\n" if out else "")


_BLAS_FLAGS = {
    "cublas": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=false",
    "cublaslt": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true",
    "rocblas": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=false",
    "hipblaslt": "--xla_gpu_enable_triton_gemm=false --xla_gpu_enable_cublaslt=true",
    "triton": "--xla_gpu_enable_triton_gemm=true",
}


def xla_flags(session, res) -> list[tuple[str, str]]:
    """(flag, why) pairs: the XLA flags that correspond to this command."""
    flags: list[tuple[str, str]] = []
    sel = res.selection
    names = sorted({p.split("/")[-1].split(":")[0] for pats in sel.matched.values() for p in pats})
    if sel.mode == "disable" and names:
        flags.append((f"--xla_disable_hlo_passes={','.join(names)}", "the passes this command disabled"))
    elif sel.mode == "enable-only" and names:
        flags.append((f"--xla_enable_hlo_passes_only={','.join(names)}", "the only passes this command ran"))
    elif sel.mode == "none":
        flags.append(("--xla_disable_all_hlo_passes=true", "this command ran no pass"))
    force = getattr(session, "force_backend", None) or _argv_value(session.argv, "--force-backend")
    if force:
        backend = force.split("=")[-1].split(":")[0].strip().lower()
        if backend in _BLAS_FLAGS:
            flags.append((_BLAS_FLAGS[backend], f"--force-backend {force}: the GEMM backend XLA would pick"))
    culprit = None
    if res.violations:
        v = res.violations[0]
        culprit = v.after_pass.split("/")[-1] if v.pass_index else None
    elif res.failure is not None:
        culprit = res.failure.name
    if culprit:
        flags.append((f"--xla_disable_hlo_passes={culprit}", "to check the culprit pass (XLA's name)"))
    flags.append(("--xla_dump_to=dump --xla_dump_hlo_pass_re=.*",
                  "pass-by-pass dumps to compare with hlorun's --dump-to"))
    return flags


def _argv_value(argv: Sequence[str], flag: str) -> str | None:
    argv = list(argv or ())
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


# ---------------------------------------------------------------------------
# The bundle
# ---------------------------------------------------------------------------


def is_archive(path: str) -> bool:
    return path.endswith((".tar.gz", ".tgz"))


def staging_dir(dest: str) -> Path:
    """Where the bundle is assembled: the directory itself, or a temporary
    directory next to an archive."""
    if is_archive(dest):
        parent = Path(dest).resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".hlorun-bug-report-", dir=str(parent)))
    p = Path(dest)
    p.mkdir(parents=True, exist_ok=True)
    return p


def write_bundle(dest: str, staging: Path, session, argv: list[str], reduce: bool = False,
                 reduce_timeout: float | None = 300.0) -> dict[str, Any]:
    """Fill ``staging`` from a finished compile ``session`` and pack it to
    ``dest``.  Returns a summary (files, reduced sizes)."""
    res = session.result
    assert res is not None
    spec = res.spec
    inp = Path(session.file)
    scrub = Scrubber(staging, [(str(inp.resolve().parent) + os.sep, "")])
    files: dict[str, str] = {}

    def put(name: str, text: str) -> None:
        write_atomic(staging / name, text)
        files[name] = text

    module_text = read_text(session.file)
    put("input.hlo", scrub.module(module_text))
    repro_cmd = ["hlorun", "compile", "input.hlo", "--pipeline", "pipeline.yaml"] + _passthrough(argv)
    put("pipeline.yaml", pipeline_yaml(spec, res.selection))
    original = "hlorun compile " + " ".join(shlex.quote(a) for a in argv)
    put("command.txt", scrub.text(f"# the command that was run\n{original}\n\n"
                                  f"# reproduce from this bundle\n{' '.join(map(shlex.quote, repro_cmd))}\n"))
    ftext = failure_text(res) or "no violation and no pass failure: the compile succeeded\n"
    put("failure.txt", scrub.text(ftext))
    t = res.target
    put("target.json", json.dumps({"platform": t.platform, "device": t.device,
                                   "compute_capability": t.compute_capability,
                                   "pipeline": spec.name}, indent=2) + "\n")
    decisions = res.records("autotune")
    if decisions:
        put("autotune.json", json.dumps(scrub.value({"decisions": decisions}), indent=2) + "\n")
    cache = _autotune_cache(spec)
    if cache is not None and Path(cache).is_file():
        put("autotune_cache" + "".join(Path(cache).suffixes[-1:] or [".json"]), scrub.text(read_text(cache)))
    put("result.json", json.dumps(scrub.value(session.to_json(res)), indent=2) + "\n")
    put("versions.json", json.dumps(versions(), indent=2) + "\n")
    reduced = None
    if reduce:
        reduced = _reduce(session, argv, res, staging, reduce_timeout)
        if reduced is not None:
            put("reduced.hlo", scrub.module(reduced.text))
            put("reduce.json", json.dumps(scrub.value(reduced.to_json()), indent=2) + "\n")
    repro = staging / "repro"
    if repro.is_dir():
        for f in sorted(repro.iterdir()):
            if f.is_file():
                text = read_text(f)
                text = scrub.module(text) if f.suffix == ".hlo" else scrub.text(text)
                write_atomic(f, text)
                files[f"repro/{f.name}"] = text
    put("README.md", readme(session, res, argv, repro_cmd, reduced, sorted(files) + ["README.md"],
                            scrub))
    if is_archive(dest):
        _tar(staging, dest)
        shutil.rmtree(staging, ignore_errors=True)
    return {"path": dest, "files": sorted(files), "reduced": reduced.to_json() if reduced else None}


def _passthrough(argv: list[str]) -> list[str]:
    """Compile flags that still matter in the bundle: the pipeline and the
    selection are inside pipeline.yaml, outputs and reports are not wanted."""
    drop_value = {"-p", "--pipeline", "-o", "--output", "--dump-to", "--repro-dir", "--bug-report",
                  "--reduce-timeout", "--disable-passes", "--enable-passes-only",
                  "--xla_disable_hlo_passes", "--xla_enable_hlo_passes_only", "--xla-flags",
                  "--format", "--diff", "--diff-filter", "--diff-form", "--dump-pass-re",
                  "--xla_dump_to", "--xla_dump_hlo_pass_re", "--platform", "--device",
                  "--compute-capability"}
    drop_flag = {"--reduce", "--xla_disable_all_hlo_passes", "--traceback", "--no-table", "--table"}
    out: list[str] = []
    args = list(argv)
    i = 0
    first_positional = True
    while i < len(args):
        a = args[i]
        key = a.split("=", 1)[0]
        if key in drop_value:
            i += 1 if "=" in a else 2
            continue
        if a in drop_flag:
            i += 1
            continue
        if not a.startswith("-") and first_positional:
            first_positional = False  # the module file: input.hlo in the bundle
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def _autotune_cache(spec) -> str | None:
    sec = spec.section("autotune", None)
    if isinstance(sec, dict) and sec.get("cache"):
        return str(sec["cache"])
    for s in spec.passes():
        if s.name == "autotuner" and s.options.get("cache"):
            return str(s.options["cache"])
    return None


def _reduce(session, argv: list[str], res, staging: Path, timeout: float | None):
    from . import report
    from .reduce import CompileConfig, ReduceOptions, Reducer
    from .reduce.conditions import PassFailsCondition, ViolationCondition
    if res.failure is not None:
        cond = PassFailsCondition(res.failure.name)
    elif res.violations:
        cond = ViolationCondition(res.violations[0].rule)
    else:
        report.warn("--reduce: the compile succeeded; nothing to reduce")
        return None
    cfg = CompileConfig(session=session, argv=list(argv))
    cond.prepare(cfg)
    bar = None

    def progress(ev):
        nonlocal bar
        if bar is None:
            bar = report.ShrinkProgress("reduce", ev["start_instructions"], ev["start_bytes"])
        bar.update(ev["instructions"], ev["bytes"], ev["tests"], ev["strategy"])
    try:
        out = Reducer(read_text(session.file), session.file, cond,
                      ReduceOptions(output=str(staging / "reduced.hlo"), timeout=timeout,
                                    progress=progress)).run()
    finally:
        if bar is not None:
            bar.close()
    return out


def _tar(staging: Path, dest: str) -> None:
    """A deterministic .tar.gz (sorted, no owners, fixed times)."""
    import gzip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(staging.rglob("*")):
            if not f.is_file():
                continue
            data = f.read_bytes()
            info = tarfile.TarInfo(f"{ROOT}/{f.relative_to(staging).as_posix()}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, filename="") as z:
        z.write(buf.getvalue())
    write_atomic(dest, gz.getvalue())


# ---------------------------------------------------------------------------
# README
# ---------------------------------------------------------------------------


def readme(session, res, argv, repro_cmd, reduced, files, scrub: Scrubber) -> str:
    spec = res.spec
    t = res.target
    status = {"ok": "compiles cleanly", "violation": "violates an invariant",
              "pass-failure": "a pass fails"}[res.status]
    L = [f"# hlorun bug report: `{res.module.name}` {status}", ""]
    L += ["## What fails", ""]
    if res.failure is not None:
        f = res.failure
        L += [f"Pass **{f.name}** (`{f.path}`, pass #{f.index} of pipeline `{spec.name}`) fails "
              f"with {f.exception}:", "", "```", scrub.text(f.message), "```", ""]
    for v in res.violations[:5]:
        where = f"first after pass #{v.pass_index} `{v.after_pass}`" if v.pass_index else \
            "already in the input"
        pre = f" It is the precondition of `{v.precondition_of}`." if v.precondition_of else ""
        inst = f" at `{v.instruction}`" if v.instruction else ""
        L += [f"Invariant **{v.rule}** is violated{inst}, {where}.{pre}", "", "```",
              scrub.text(v.message), "```", ""]
        if v.diagnostic is not None and v.diagnostic.notes:
            L += [f"Hint: {n}" for n in v.diagnostic.notes] + [""]
    if res.status == "ok":
        L += ["Nothing: the compile succeeded (the bundle records the setup).", ""]
    L += [f"Pipeline `{spec.name}` ({len(res.events)} passes run), target {t.platform} "
          f"{t.device} (compute capability {t.compute_capability}).", ""]
    if reduced is not None:
        L += [f"Reduced with `hlorun reduce`: {reduced.start_instructions} -> "
              f"{reduced.end_instructions} instructions ({reduced.start_bytes} -> "
              f"{reduced.end_bytes} bytes) in {reduced.seconds:.1f} s"
              + ("; **the condition is flaky on the reduced module**" if reduced.flaky else "")
              + ".", ""]
        L += ["```", reduced.text.strip() if len(reduced.text) < 4000 else "(see reduced.hlo)",
              "```", ""]
    L += ["## Reproduce", "", "One line, from this directory (exit code 2 on a violation or failure):",
          "", "    " + " ".join(map(shlex.quote, repro_cmd)), ""]
    if reduced is not None:
        L += ["The reduced module:", "",
              "    " + " ".join(map(shlex.quote, ["hlorun", "compile", "reduced.hlo"] + repro_cmd[3:])), ""]
    if "repro/before.hlo" in files:
        L += ["Just the culprit pass, on the module right before it:", "",
              "    hlorun compile repro/before.hlo --pipeline repro/repro.yaml --diff none", ""]
    L += ["## With XLA", "", "The XLA flags that correspond to this command:", ""]
    for flag, why in xla_flags(session, res):
        L.append(f"* `{flag}`: {why}")
    platform = {"cuda": "CUDA", "rocm": "ROCM"}.get(t.platform, t.platform.upper())
    disable = [f for f, _ in xla_flags(session, res) if "passes" in f and "culprit" not in _]
    L += ["", "For example:", "",
          f"    XLA_FLAGS=\"{' '.join(disable + ['--xla_dump_to=dump', '--xla_dump_hlo_pass_re=.*'])}\" "
          f"run_hlo_module --platform={platform} --reference_platform= input.hlo", "",
          "hlorun's pass and sub-pipeline names are XLA's, so dump file names line up "
          "(`module_NNNN.NAME.SEQ.PIPELINE.after_PASS.before_NEXT.txt`).", ""]
    L += ["## Contents", ""]
    what = {"input.hlo": "the module as given", "reduced.hlo": "the reduced module",
            "pipeline.yaml": "the effective pipeline (disabled steps commented out)",
            "command.txt": "the command that was run, and the one that reproduces from here",
            "failure.txt": "the violation / failure text", "target.json": "target",
            "autotune.json": "autotuner decisions", "result.json": "hlorun's JSON report",
            "reduce.json": "reduction statistics", "versions.json": "versions",
            "README.md": "this file", "repro/before.hlo": "the module right before the culprit pass",
            "repro/repro.yaml": "a pipeline with just that pass",
            "repro/command.txt": "the original command", "repro/README.md": "about repro/"}
    for f in files:
        L.append(f"* `{f}`: {what.get(f, 'autotuner cache' if f.startswith('autotune_cache') else '')}")
    v = versions()
    L += ["", "## Environment", "",
          f"hlorun {v['hlorun']}, Python {v['python']} ({v['os']}); "
          + ", ".join(f"{k} {x}" for k, x in v["packages"].items()), ""]
    return scrub.text("\n".join(L))


__all__ = ["Scrubber", "argv_from_params", "pipeline_yaml", "staging_dir", "write_bundle"]
