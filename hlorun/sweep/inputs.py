"""Which modules a sweep runs: HLO files named on the command line, and the
HLO files under directories (searched recursively).

* A file named explicitly is always taken, whatever its name.
* Under a directory, files ending in ``.hlo`` or ``.txt``, optionally
  compressed (``.gz``, ``.xz``), are taken; hidden files and directories
  are skipped.
* A directory holding an XLA dump (``--xla_dump_to``: files named
  ``module_NNNN.NAME.before_optimizations.txt``) contributes only each
  module's ``before_optimizations`` file: the other files there are pass
  snapshots, buffer assignments and autotuning logs of the same modules.

The order is deterministic (sorted paths), duplicates are dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError

COMPRESSED = (".gz", ".xz")
HLO_SUFFIXES = (".hlo", ".txt")
BEFORE_OPT = ".before_optimizations.txt"


def strip_compression(name: str) -> str:
    for c in COMPRESSED:
        if name.endswith(c):
            return name[: -len(c)]
    return name


def is_hlo_name(name: str) -> bool:
    return strip_compression(name).endswith(HLO_SUFFIXES)


def is_dump_entry(name: str) -> bool:
    """``module_0001.jit_f.before_optimizations.txt`` (maybe compressed)."""
    return name.startswith("module_") and strip_compression(name).endswith(BEFORE_OPT)


def _from_directory(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        names = sorted(f for f in filenames if not f.startswith("."))
        dump = [f for f in names if is_dump_entry(f)]
        chosen = dump if dump else [f for f in names if is_hlo_name(f)]
        out.extend(Path(dirpath) / f for f in chosen)
    return out


def discover(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The module files for ``paths`` (files and directories), as strings
    relative to how they were given.  Raises UsageError for a path that
    does not exist, and when nothing is found."""
    seen: set[str] = set()
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = _from_directory(path)
        elif path.exists():
            found = [path]
        else:
            raise UsageError(f"{p}: no such file or directory")
        for f in found:
            key = os.path.normpath(os.path.abspath(f))
            if key not in seen:
                seen.add(key)
                out.append(str(f))
    if not out:
        raise UsageError("no HLO files found in " + ", ".join(paths)
                         + f" (looked for {', '.join('*' + s for s in HLO_SUFFIXES)}, "
                           "maybe .gz/.xz, and XLA dumps' *.before_optimizations.txt)")
    return out


def split_chunks(files: list[str]) -> list[str]:
    """``--split-input-file``: one label ``FILE:LINE`` per ``// -----``
    separated module of each file (LINE: its first line), as ``hlorun check
    --split-input-file`` labels them.  A file that cannot be read keeps one
    label (``FILE:1``) and is reported as bad input by its task."""
    from ..text.parser import split_input_file
    from .adapter import read_module_text
    out: list[str] = []
    for f in files:
        try:
            chunks = split_input_file(read_module_text(f))
        except Exception:
            chunks = [(1, "")]
        out.extend(f"{f}:{line}" for line, _ in chunks or [(1, "")])
    return out


def chunk_of(label: str) -> tuple[str, int]:
    """``FILE:LINE`` -> (FILE, LINE)."""
    path, _, line = label.rpartition(":")
    if not path or not line.isdigit():
        raise ValueError(f"not a FILE:LINE label: {label}")
    return path, int(line)


def module_key(path: str) -> str:
    """The identity of a module in a results file (resume): its absolute,
    normalized path."""
    return os.path.normpath(os.path.abspath(path))


__all__ = ["chunk_of", "discover", "is_dump_entry", "is_hlo_name", "module_key", "split_chunks",
           "strip_compression"]
