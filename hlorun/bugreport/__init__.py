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
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..text.fileio import read_text, write_atomic
from .pieces import failure_text, pipeline_yaml, versions, xla_flags
from .readme import readme
from .scrub import Scrubber

ROOT = "hlorun-bug-report"


@dataclass
class Compiled:
    """What a bug report is made from: the module file, the compile
    command's arguments (without the word ``compile``), the result and
    where the module was written (``-o``)."""

    file: str
    argv: list[str]
    compiled: Any  # hlorun.CompileResult
    output: str | None = None

    @property
    def result(self):
        """The pipeline run (:class:`hlorun.pipeline.run.PipelineResult`)."""
        return self.compiled.run

    @property
    def autotune(self) -> dict[str, Any]:
        return self.compiled.options.autotune.section()

    def to_json(self) -> dict[str, Any]:
        return self.compiled.to_json(input=self.file, output=self.output)


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


def write_bundle(dest: str, staging: Path, session: Compiled, reduce: bool = False,
                 reduce_timeout: float | None = 300.0) -> dict[str, Any]:
    """Fill ``staging`` from a finished compile (``session``) and pack it to
    ``dest``.  Returns a summary (files, reduced sizes)."""
    argv = list(session.argv)
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
    cache = _autotune_cache(spec)
    cache_name = None
    if cache is not None and Path(cache).is_file():
        cache_name = "autotune_cache" + "".join(Path(cache).suffixes[-1:] or [".json"])
    yaml_text = pipeline_yaml(spec, res.selection)
    if cache_name:  # the bundle's copy of the cache replays the same decisions
        yaml_text = yaml_text.replace(str(cache), cache_name)
    put("pipeline.yaml", scrub.text(yaml_text))
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
    if cache_name:
        put(cache_name, scrub.text(read_text(cache)))
    put("result.json", json.dumps(scrub.value(session.to_json()), indent=2) + "\n")
    put("versions.json", json.dumps(versions(), indent=2) + "\n")
    reduced = None
    if reduce:
        reduced = _reduce(session, res, staging, reduce_timeout)
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


def _reduce(session: Compiled, res, staging: Path, timeout: float | None):
    from ..report import console as report
    from ..reduce import CompileConfig, ReduceOptions, Reducer
    from ..reduce.conditions import PassFailsCondition, ViolationCondition
    if res.failure is not None:
        cond = PassFailsCondition(res.failure.name)
    elif res.violations:
        cond = ViolationCondition(res.violations[0].rule)
    else:
        report.warn("--reduce: the compile succeeded; nothing to reduce")
        return None
    cfg = CompileConfig(session.file, session.compiled.options, list(session.argv))
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


__all__ = ["Compiled", "Scrubber", "failure_text", "pipeline_yaml", "staging_dir",
           "versions", "write_bundle", "xla_flags"]
