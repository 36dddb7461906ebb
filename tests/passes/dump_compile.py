"""A known XLA dump (testdata/xla-dumps/NAME) compiled on gpu-cuda once per
test session, for the tests that only read its final module."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=None)
def compiled_known_dump(name: str):
    """``(RunResult, final module)`` of the dump's before_optimizations module
    on gpu-cuda, or None when the dump is not present.  Callers must not
    change the module."""
    sys.path.insert(0, str(ROOT / "bench"))
    import kernel_lists
    d = ROOT / "testdata" / "xla-dumps" / name
    files = kernel_lists.dump_files(d)
    if files is None:
        return None
    import hlorun
    from hlorun.pipeline.loader import load_pipeline
    from hlorun.pipeline.run import RunOptions, run_pipeline
    module = hlorun.load_module(files[0])
    return run_pipeline(module, load_pipeline("gpu-cuda"), RunOptions()), module
