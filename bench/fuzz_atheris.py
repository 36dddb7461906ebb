"""Coverage-guided fuzzing of the parser, printer and verifier with atheris
(libFuzzer for Python), when ``pip install atheris`` works.

    python bench/fuzz_atheris.py [CORPUS_DIR] -atheris_runs=200000 -max_total_time=600

Seeds: the corpus directory (default: a temporary copy of the XLA corpus
and testdata modules below 16 KB).  Each input is decoded as UTF-8
(invalid bytes replaced) and checked like ``bench/fuzz.py``'s
``check_case`` without the pipeline: anything but a located
``HloParseError``, a clean print/parse round trip and a verifier that does
not crash raises, and libFuzzer saves the input as ``crash-*``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from hlorun.text.parser import parse_module
    from hlorun.text.printer import print_module
    from hlorun.errors import HloParseError
    from hlorun.verifier.checkers import verify

sys.setrecursionlimit(3000)


class Unexpected(Exception):
    pass


def one(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    try:
        m = parse_module(text, "fuzz.hlo")
    except HloParseError as e:
        if e.line <= 0 or e.column <= 0:
            raise Unexpected(f"unlocated parse error: {e}") from None
        return
    printed = print_module(m)
    try:
        again = print_module(parse_module(printed, "printed.hlo"))
    except HloParseError as e:
        raise Unexpected(f"printed text does not parse: {e}") from None
    if again != printed:
        raise Unexpected("print(parse(print(m))) != print(m)")
    crashed = [d for d in verify(m) if "crashed" in d.message]
    if crashed:
        raise Unexpected(crashed[0].message)


def seed_dir() -> str:
    from fuzz import load_seeds
    d = tempfile.mkdtemp(prefix="hlorun-atheris-")
    for i, (_, text) in enumerate(load_seeds(16)):
        Path(d, f"seed{i:05d}.hlo").write_text(text, encoding="utf-8")
    return d


def main() -> None:
    argv = list(sys.argv)
    if len(argv) < 2 or argv[1].startswith("-"):
        argv.insert(1, seed_dir())
    if not any(a.startswith("-max_len") for a in argv):
        argv.append("-max_len=65536")
    atheris.Setup(argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
