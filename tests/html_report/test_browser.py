"""The HTML report and the Model Explorer adapter in a real browser:
Playwright driving Debian's Chromium (``.ci/run`` installs it; browsers
cannot be downloaded here).  Outside CI these tests skip when Chromium or
Playwright is missing.  Screenshots go to ``tmp_path`` (and to
``$HLORUN_SCREENSHOTS`` when set)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hlorun
from hlorun.report.html import html_from_result

from ..conftest import TESTDATA, shared_path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NETWORK_NOISE = ("ERR_NAME_NOT_RESOLVED", "ERR_INTERNET_DISCONNECTED", "ERR_CONNECTION_REFUSED")


def _need(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing: CI installs it (.ci/run)")
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright")
    if CHROMIUM is None:
        _need("chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    def __init__(self, browser, tmp_path: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.tmp = tmp_path

    def shot(self, name: str) -> None:
        path = self.tmp / f"{name}.png"
        self.page.screenshot(path=str(path))
        out = os.environ.get("HLORUN_SCREENSHOTS")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(out) / path.name)

    def real_errors(self) -> list[str]:
        return [e for e in self.errors if not any(n in e for n in NETWORK_NOISE)]


def _open_report(browser, tmp_path, result, name) -> tuple[Page, float, int]:
    html = html_from_result(result)
    path = tmp_path / f"{name}.html"
    path.write_text(html)
    page = Page(browser, tmp_path)
    t = time.perf_counter()
    page.page.goto(path.as_uri())
    page.page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    return page, time.perf_counter() - t, len(html)


def test_s0_report_in_a_browser(browser, tmp_path):
    r = hlorun.compile(TESTDATA / "s0" / "jit_dot_general_consumer.hlo", "gpu-rocm-41481",
                       diffs="changed", force_backend="hipblaslt")
    page, _, _ = _open_report(browser, tmp_path, r, "s0")
    pg = page.page
    assert "VIOLATION" in pg.inner_text("header")
    problem = pg.locator(".problem").first
    assert "reshape-is-bitcast" in problem.inner_text()
    assert pg.locator("#timeline-table tr.pass").count() == len(r.passes)
    # the violation links to the culprit pass: its diff opens with the reshape highlighted
    problem.locator("a[data-pass]").click()
    pg.wait_for_selector("#diff-body")
    assert "autotuner/autotuner" in pg.inner_text("#diff h3")
    assert pg.locator("#diff-body .hl").count() >= 1
    page.shot("s0-violation")
    assert page.real_errors() == []


def test_training_step_report_in_a_browser(browser, tmp_path):
    r = hlorun.compile(TESTDATA / "transformer" / "jax_4layer_train_step.hlo.gz", diffs="changed")
    page, seconds, size = _open_report(browser, tmp_path, r, "step")
    pg = page.page
    # click a changed pass: its diff renders, unified then side by side
    changed = next(p for p in r.passes if p.changed)
    pg.click(f"tr.pass[data-index='{changed.index}']")
    pg.wait_for_selector("#diff-body .d-add")
    page.shot("step-timeline")
    pg.check("input[name=mode][value=sbs]")
    pg.wait_for_selector("#diff-body .sbs")
    # follow an instruction from the diff
    pg.locator("#diff-body .iname").first.click()
    pg.wait_for_selector("#fpanel h3")
    assert pg.locator("#fpanel tbody tr").count() >= 1
    # the kernel graph: one node per kernel, a click shows the body and story
    pg.click("nav button[data-tab=kernels]")
    assert pg.locator("#kgraph .knode").count() == len(r.kernels)
    pg.locator("#kgraph .knode[data-kernel^='gemm_fusion']").first.click()
    pg.wait_for_selector("#kpanel pre")
    assert " dot(" in pg.inner_text("#kpanel")
    page.shot("step-kernels")
    # the autotuner table sorts by margin on a click
    pg.click("nav button[data-tab=autotune]")
    pg.wait_for_selector("#attable tbody tr")
    rows = pg.locator("#attable tbody tr")
    assert rows.count() == len(r.autotune) > 0
    pg.click("#attable th[data-key=margin]")
    pg.wait_for_selector("#attable th[data-key=margin]:has-text('▲')")
    margins = [m for m in (d.margin for d in r.autotune) if m is not None]
    first = pg.locator("#attable tbody tr").first.locator("td").nth(6).inner_text()
    assert first == f"{100 * min(margins):.1f}%"
    rows.first.click()
    pg.wait_for_selector("#atpanel h3")
    page.shot("step-autotuner")
    assert page.real_errors() == []
    assert seconds < 10


@pytest.mark.slow
def test_big_model_report_stays_small_and_fast(browser, tmp_path):
    path = shared_path("corpus", "xla", "files",
                       "xla__tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo.gz")
    r = hlorun.compile(path, enable_passes_only=["optimization"], diffs="changed")
    assert r.module.instruction_count > 40_000
    page, seconds, size = _open_report(browser, tmp_path, r, "big")
    pg = page.page
    print(f"big model report: {size / 1e6:.1f} MB, loaded in {seconds:.2f} s")
    assert size < 30e6 and seconds < 15
    pg.click("nav button[data-tab=kernels]")
    assert 0 < pg.locator("#kgraph .knode[data-group]").count() <= 120
    pg.locator("#kgraph .knode").first.click()
    pg.wait_for_selector("#kpanel h3")
    changed = max((p for p in r.passes if p.changed), key=lambda p: len(p.diff()))
    pg.click("nav button[data-tab=timeline]")
    pg.click(f"tr.pass[data-index='{changed.index}']")
    pg.wait_for_selector("#diff-body div")
    page.shot("big")
    assert page.real_errors() == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_model_explorer_shows_hlo(browser, tmp_path):
    exe = shutil.which("model-explorer") or str(Path(sys.executable).parent / "model-explorer")
    try:
        import model_explorer  # noqa: F401
    except ImportError:
        _need("ai-edge-model-explorer (the explorer extra)")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(hlorun.__file__).parent.parent)]
                                                     + sys.path))
    # the compiled S0 module with the compile's node data overlays
    model, me = tmp_path / "final.hlo", tmp_path / "me"
    subprocess.run([sys.executable, "-m", "hlorun", "compile",
                    str(TESTDATA / "s0" / "jit_dot_general_consumer.hlo"), "-o", str(model),
                    "--model-explorer-data", str(me), "--no-table", "--diff", "none"],
                   env=env, check=True, capture_output=True)
    overlays = ",".join(str(me / f) for f in ("final_kernel.json", "created_by.json"))
    proc = subprocess.Popen([exe, str(model), "--extensions=hlorun.model_explorer",
                             "--node_data_paths", overlays,
                             "--no_open_in_browser", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url, lines = None, []
        deadline = time.time() + 90
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("http://127.0.0.1"):
                url = line.strip()
        assert url, "".join(lines)
        assert "HLO text adapter (hlorun)" in "".join(lines)
        page = Page(browser, tmp_path)
        page.page.goto(url)
        page.page.wait_for_selector("text=final kernel", timeout=60_000)
        page.page.wait_for_timeout(1500)
        page.shot("model-explorer")
        assert page.real_errors() == []
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
