"""How ``hlorun compile`` shows a :class:`hlorun.CompileResult` as text
(stderr), most important first: the pass failure and violations, a short
pass table, the autotuning decisions summarized, the final kernels, then
compact per-pass diffs and the one-line status (budgets in
:mod:`hlorun.report.textout`).  Also: the module on stdout (not dumped on a
terminal when long) and the proportionate ``--format json`` document."""

from __future__ import annotations

import sys
from typing import Any


def module_to_stdout(module_text: str) -> None:
    """The optimized module goes to stdout, unless stdout is a terminal and
    the module is long: then a hint (thousands of lines would push
    everything else off the screen)."""
    from ..report import console as report
    n = module_text.count("\n")
    if n > 200 and sys.stdout.isatty():
        report.info(f"optimized module: {n} lines, not printed on a terminal; write it with "
                    f"-o FILE or redirect stdout (> out.hlo)")
        return
    report.write_stdout(module_text)


def proportionate_json(doc: dict[str, Any], include: tuple[str, ...], remarks: bool,
                       diffs, module_text: str | None) -> dict[str, Any]:
    """The JSON report without its heavy parts unless asked (--json-include;
    --remarks and --explain ask for theirs): remarks are counted, autotuner
    records lose their full candidate lists."""
    want = set(include)
    if remarks:
        want.add("remarks")
    if doc.get("kernels") is not None:  # --explain: rejected candidates are part of the answer
        want.add("candidates")
    doc["remarks_total"] = len(doc["remarks"])
    doc["omitted"] = [p for p in ("remarks", "candidates") if p not in want]
    if "remarks" not in want:
        doc["remarks"] = []
    if "candidates" not in want:
        doc["autotune"] = [{k: v for k, v in r.items() if k != "candidates"}
                           for r in doc["autotune"]]
    if "diffs" in want:
        from ..report.textout import _title
        doc["diffs"] = [{"pass": _title(h), "lines": ls} for h, ls in diffs.diffs]
    if "module" in want:
        doc["module_text"] = module_text
    return doc


def render_text(result, table: bool = True, remarks: bool = False, traceback: bool = False,
                repro_in_bundle: bool = False, full_tables: bool = False, diffs=None,
                diff_mode: str = "short") -> None:
    from ..report import console as report, textout
    res = result.run
    explain = result.options.diagnostics.explain
    t = res.target
    report.info(f"pipeline {res.spec.name} on {res.module.name} ({res.instructions_before} "
                f"instructions; target {t.platform} {t.device})")
    _problems(res, traceback, full_tables)
    if table:
        rows, note = textout.pass_rows(res.events, res.failure.index if res.failure else None,
                                       {v.pass_index for v in res.violations if v.pass_index},
                                       full_tables)
        report.pass_table(rows)
        if note:
            report.info(note)
    if remarks:
        for e, r in res.remarks:
            where = f" {r.instruction}:" if r.instruction else ""
            report.info(f"#{e.index} {e.path} [{r.kind}]{where} {r.message}")
    elif res.remarks:
        report.info(f"remarks: {len(res.remarks)} (--remarks lists them)")
    autotune = res.records("autotune")
    if autotune:
        textout.render_autotune(autotune, explain, full_tables, table)
    if explain is not None:
        from ..analysis.explain import render_text as render_kernels
        kernels = result.kernels
        report.info(f"kernels ({len(kernels)}"
                    + (f" matching {explain}" if explain != ".*" else "") + "):")
        report.info(render_kernels(kernels))
    elif res.failure is None:
        line = textout.kernel_summary(res.module)
        if line:
            report.info(line + "; --explain says where each came from")
    for note in res.notes:
        report.warn(note)
    if result.repro and not repro_in_bundle:
        report.info(f"reproducer: {result.repro['dir']}")
        report.info(f"  {result.repro['command']}")
    if result.numerics is not None:
        result.numerics.render_text(report)
    if diffs is not None:
        diffs.render(diff_mode)
    n_changed = sum(1 for e in res.events if e.changed)
    status = {"ok": "ok", "violation": "VIOLATION", "pass-failure": "PASS FAILURE"}[res.status]
    limit = (f", stopped at --pass-limit {result.options.selection.pass_limit}"
             if res.stopped_by_limit else "")
    report.summary(
        f"{status}: {len(res.events)} passes run, {n_changed} changed, "
        f"{res.instructions_before} -> {res.module.instruction_count} instructions, "
        f"{res.seconds:.2f} s (passes {res.pass_seconds:.2f} s, checkers "
        f"{res.checker_seconds:.2f} s){limit}", res.status == "ok")


def _problems(res, traceback: bool, full: bool) -> None:
    """The pass failure and the violations (at most 20 unless ``full``)."""
    from ..report import console as report
    if res.failure:
        f = res.failure
        body = [f"pass #{f.index} {f.path} failed ({f.exception})", f"  {f.message}"]
        if f.instruction:
            body.append(f"  instruction: {f.computation + '/' if f.computation else ''}{f.instruction}")
        if traceback:
            body.append(f.traceback.rstrip())
        elif f.exception != "PassError":
            body.append("  (an unexpected exception: a bug in the pass; --traceback shows where)")
        report.panel("pass failure", "\n".join(body))
    if res.violations:
        body = []
        shown = res.violations if full else res.violations[:20]
        for v in shown:
            where = f"after #{v.pass_index} {v.after_pass}" if v.pass_index else "at pipeline start"
            if v.precondition_of:
                where = f"precondition of {v.precondition_of}, first violated {where}"
            body.append(f"[{v.rule}] {where}")
            d = v.diagnostic
            if d is not None:
                inst = f"{d.computation + '/' if d.computation else ''}{d.instruction}" \
                    if d.instruction else "-"
                body.append(f"  instruction: {inst}")
            body.append(f"  {v.message}")
        if len(shown) < len(res.violations):
            body.append(f"... {len(res.violations) - len(shown)} more (--full-tables or "
                        f"--format json lists all)")
        report.panel(f"{len(res.violations)} violation(s)", "\n".join(body))
