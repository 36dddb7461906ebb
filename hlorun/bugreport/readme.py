"""README.md of a bug report, written for an XLA maintainer."""

from __future__ import annotations

import shlex

from .pieces import versions, xla_flags
from .scrub import Scrubber


def readme(session, res, argv, repro_cmd, reduced, files, scrub: Scrubber) -> str:
    spec = res.spec
    t = res.target
    status = {"ok": "compiles cleanly", "violation": "violates an invariant",
              "pass-failure": "a pass fails"}.get(res.status, res.status.replace("-", " "))
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


__all__ = ["readme"]
