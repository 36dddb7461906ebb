"""How ``hlorun bisect`` (and ``diff-pipelines``) show their results as text."""

from __future__ import annotations


def render_bisect(report, res, show_diff: bool) -> None:
    for p in res.probes:
        limit = "all" if p.limit is None else str(p.limit)
        report.info(f"BISECT: --pass-limit {limit:>4}: {'holds' if p.interesting else 'no':5} "
                    f"({p.passes_run} passes, {p.seconds * 1000:.0f} ms)")
    if res.first == 0:
        report.summary(f"{res.condition} holds before any pass runs (the input already shows it)", False)
        report.info(f"  {res.detail}")
        return
    it = f" [{res.iteration}]" if res.iteration else ""
    report.summary(f"first pass after which {res.condition} holds: #{res.first} {res.path}{it} "
                   f"(of {res.passes_total}; {len(res.probes)} compiles, {res.seconds:.2f} s)", False)
    report.info(f"  {res.detail}")
    for r in res.remarks[:10]:
        report.info(f"  remark [{r['kind']}] {r['instruction'] or '-'}: {r['message']}")
    report.info(f"  reproduce: hlorun compile ... --pass-limit {res.first} (and {res.first - 1} "
                f"to see it pass)")
    if show_diff and res.diff:
        report.diff_block(f"--- pass #{res.first} {res.path}", res.diff[2:] if len(res.diff) > 2 else res.diff)


def render_between(report, d, show_diff: bool) -> None:
    report.summary(d.summary(), not d.found)
    report.info(f"  {d.pipeline_a}: {d.steps_a} passes ({d.status_a}); {d.pipeline_b}: "
                f"{d.steps_b} passes ({d.status_b}); {d.seconds:.2f} s")
    if d.skipped_a or d.skipped_b:
        report.info("  steps in only one version that changed nothing before that: "
                    + ", ".join([f"{d.pipeline_a}: {s.describe()}" for s in d.skipped_a]
                                + [f"{d.pipeline_b}: {s.describe()}" for s in d.skipped_b]))
    for side, step in ((d.pipeline_a, d.step_a), (d.pipeline_b, d.step_b)):
        if step is None:
            continue
        for r in step.remarks[:8]:
            report.info(f"  {side} remark [{r['kind']}] {r['instruction'] or '-'}: {r['message']}")
            skipped = (r.get("data") or {}).get("skipped") or ()
            for why in list(skipped)[:4]:  # what the rewrite left out, and why
                report.info(f"      left out: {why}")
    if show_diff and d.diff:
        report.diff_block(f"--- module after the diverging step: {d.pipeline_a} vs {d.pipeline_b}",
                          d.diff[2:] if len(d.diff) > 2 else d.diff)
