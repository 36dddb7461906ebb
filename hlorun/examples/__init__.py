"""Example modules bundled with hlorun, so the README's first command and a
new user's first try work from any directory with only the installed wheel.

A command that takes a module file also takes an example's name when no file
of that name exists (as ``--pipeline`` takes a bundled pipeline's name or a
YAML path): ``hlorun compile s0``.  ``hlorun examples`` lists them.
"""

from __future__ import annotations

import os
import tempfile
from importlib import resources
from pathlib import Path

#: name -> (file in this package, what it shows)
EXAMPLES: dict[str, tuple[str, str]] = {
    "s0": ("jit_dot_general_consumer.hlo",
           "S0: a GQA dot_general consumed transposed; `-p gpu-rocm-41481 --force-backend hipblaslt` "
           "reproduces the non-bitcast reshape reaching LayoutNormalization"),
    "s2": ("cnn_fp16.hlo", "S2: an fp16 conv net whose linear layer becomes a reduction fusion; "
                           "`hlorun explain s2 --op dot_general.9` says why"),
    "s4": ("gemm_add_bf16.hlo", "S4: a 4096^3 bf16 GEMM with an add epilogue (the incident's shape); "
                                "the autotuner table shows every candidate"),
}


def names() -> list[str]:
    return sorted(EXAMPLES)


def path(name: str) -> str | None:
    """A filesystem path to example ``name``, or None when there is no such
    example.  A zipped install gets a copy in the temporary directory."""
    entry = EXAMPLES.get(name)
    if entry is None:
        return None
    res = resources.files(__name__) / entry[0]
    if isinstance(res, Path):
        return str(res)
    copy = Path(tempfile.gettempdir()) / f"hlorun-example-{os.getuid() if hasattr(os, 'getuid') else 0}-{entry[0]}"
    copy.write_text(res.read_text())
    return str(copy)
