"""The HTML report on big modules: size of the page and the time a real
browser (Playwright + Debian's Chromium) needs until the viewer is ready,
plus the time to click the biggest diff and the kernel graph.

    python bench/html_report.py MODEL.hlo[.gz] [MODEL ...] [--pipeline gpu-cuda]
        [--enable-passes-only optimization]

Prints one row per model: instructions, compile s, report build s, MB,
browser load s, biggest-diff open s, kernel graph nodes (groups when
summarized).  Absolute times depend on the machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--pipeline", default="gpu-cuda")
    ap.add_argument("--enable-passes-only", action="append", default=[])
    args = ap.parse_args(argv)
    import hlorun
    from hlorun.report.html import html_from_result
    from playwright.sync_api import sync_playwright
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    tmp = Path(tempfile.mkdtemp())
    print("| model | instructions | compile s | report s | MB | load s | biggest diff s | graph nodes |")
    print("|---|---|---|---|---|---|---|---|")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for model in args.models:
            m = hlorun.load(model)
            n = m.instruction_count
            t = time.perf_counter()
            r = hlorun.compile(m, args.pipeline, copy=False, diffs="changed",
                               enable_passes_only=args.enable_passes_only)
            compile_s = time.perf_counter() - t
            t = time.perf_counter()
            html = html_from_result(r, input_name=model)
            report_s = time.perf_counter() - t
            path = tmp / (Path(model).name + ".html")
            path.write_text(html)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            t = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            load_s = time.perf_counter() - t
            big = max((q for q in r.passes if q.changed and q.index in r.diffs),
                      key=lambda q: len(r.diffs[q.index]), default=None)
            diff_s = float("nan")
            if big is not None:
                t = time.perf_counter()
                page.click(f"#timeline-table tr.pass[data-index='{big.index}']")
                page.wait_for_selector("#diff-body div", timeout=120_000)
                diff_s = time.perf_counter() - t
            page.click("nav button[data-tab=kernels]")
            nodes = page.locator("#kgraph .knode").count()
            page.close()
            print(f"| {Path(model).name} | {n} | {compile_s:.1f} | {report_s:.1f} | "
                  f"{len(html) / 1e6:.1f} | {load_s:.2f} | {diff_s:.2f} | {nodes} |", flush=True)
        browser.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
