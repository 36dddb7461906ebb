"""How ``hlorun compile`` shows a :class:`hlorun.CompileResult` as text
(stderr): the pass table, remarks, kernel explanations, autotuning
decisions, the failure and violation panels, numerics and the summary."""

from __future__ import annotations


def render_text(result, table: bool = True, remarks: bool = False, traceback: bool = False,
                repro_in_bundle: bool = False) -> None:
    from .. import report
    res = result.run
    explain = result.options.diagnostics.explain
    if table:
        rows = []
        fail_idx = res.failure.index if res.failure else None
        for e in res.events:
            changed = "FAILED" if e.index == fail_idx else (
                "LIED" if e.changed_mismatch else ("yes" if e.changed else "-"))
            it = f" [{e.iteration}]" if e.iteration else ""
            fp = f" x{e.fixed_point_iterations}" if e.fixed_point_iterations else ""
            rows.append((e.index, e.path + it + fp, changed,
                         f"{e.instructions_before} -> {e.instructions_after}",
                         f"{e.seconds * 1000:.1f} ms"))
        report.pass_table(rows, title=f"pipeline {res.spec.name} on {res.module.name}")
    if remarks:
        for e, r in res.remarks:
            where = f" {r.instruction}:" if r.instruction else ""
            report.info(f"#{e.index} {e.path} [{r.kind}]{where} {r.message}")
    if explain is not None:
        from ..explain import render_text as render_kernels
        kernels = result.kernels
        report.info(f"kernels ({len(kernels)}"
                    + (f" matching {explain}" if explain != ".*" else "") + "):")
        report.info(render_kernels(kernels))
    autotune = res.records("autotune")
    if autotune:
        from ..autotune.view import render
        render(autotune, explain)
    for note in res.notes:
        report.warn(note)
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
        for v in res.violations:
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
        report.panel(f"{len(res.violations)} violation(s)", "\n".join(body))
    if result.repro and not repro_in_bundle:
        report.info(f"reproducer: {result.repro['dir']}")
        report.info(f"  {result.repro['command']}")
    if result.numerics is not None:
        result.numerics.render_text(report)
    n_changed = sum(1 for e in res.events if e.changed)
    status = {"ok": "ok", "violation": "VIOLATION", "pass-failure": "PASS FAILURE"}[res.status]
    limit = (f", stopped at --pass-limit {result.options.selection.pass_limit}"
             if res.stopped_by_limit else "")
    report.summary(
        f"{status}: {len(res.events)} passes run, {n_changed} changed, "
        f"{res.instructions_before} -> {res.module.instruction_count} instructions, "
        f"{res.seconds:.2f} s (passes {res.pass_seconds:.2f} s, checkers "
        f"{res.checker_seconds:.2f} s){limit}", res.status == "ok")
