"""``python -m hlorun.testing.passcases [--corpus DIR] [--verbose] [SUITE...]``:
the pass-test harness.  Runs XLA's own pass tests (:mod:`hlorun.testing.
xla_cases`, one :mod:`~hlorun.testing.xla_suites` entry per XLA test file)
and our fixture files (:mod:`hlorun.testing.fixtures`), and prints
passed/failed/skipped per test file."""

from __future__ import annotations

from pathlib import Path

from .fixtures import fixture_files, load_fixture_file, run_fixture_case
from .xla_suites import SUITES, run_suite

__all__ = ["main", "run_xla_suite"]


def run_xla_suite(corpus: str | Path, test_file: str):
    """Run one XLA test file's cases (see :mod:`hlorun.testing.xla_cases`)."""
    return run_suite(Path(corpus), test_file)


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m hlorun.testing.passcases [--corpus DIR] [--verbose] [SUITE...]``:
    passed/failed/skipped per XLA test file, and our fixtures."""
    import argparse
    import os
    ap = argparse.ArgumentParser(prog="python -m hlorun.testing.passcases")
    default = Path(os.environ.get("HLORUN_SHARED", Path(__file__).resolve().parents[3] / "shared"))
    ap.add_argument("--corpus", type=Path, default=default / "corpus" / "xla")
    ap.add_argument("--testdata", type=Path, default=Path(__file__).resolve().parents[2] / "testdata")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every case that is not passed")
    ap.add_argument("suites", nargs="*", help="test file names (substring match)")
    args = ap.parse_args(argv)
    rows = []
    bad = 0
    for test_file in SUITES:
        if args.suites and not any(s in test_file for s in args.suites):
            continue
        report = run_suite(args.corpus, test_file)
        rows.append((Path(test_file).name, report.passed, report.failed, report.skipped, report.total,
                     report.rate_text))
        if args.verbose:
            for r in report.results:
                if r.status != "passed":
                    print(f"  {r.status:7} {r.name}: {r.reason}")
    fx = [run_fixture_case(c) for f in fixture_files(args.testdata) for c in load_fixture_file(f)]
    fpassed = sum(r.status == "passed" for r in fx)
    ffailed = [r for r in fx if r.status == "failed"]
    rows.append(("hlorun fixtures", fpassed, len(ffailed), 0, len(fx),
                 f"{fpassed}/{len(fx)}"))
    if args.verbose:
        for r in ffailed:
            print(f"  failed  {r.name}: {r.reason}")
    bad += len(ffailed)
    width = max(len(r[0]) for r in rows)
    print(f"{'suite':{width}}  passed  failed  skipped  total  passed/runnable")
    for name, p, f, s, t, rate in rows:
        print(f"{name:{width}}  {p:6}  {f:6}  {s:7}  {t:5}  {rate}")
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
