"""Reading HLO files (plain or .gz) and writing outputs atomically: a
partially written file never replaces a good one, and an input is never
overwritten unless the user named it as the output on purpose."""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

from .source import UsageError


def read_text(path: str | os.PathLike) -> str:
    p = str(path)
    try:
        if p.endswith(".gz"):
            with gzip.open(p, "rt", encoding="utf-8") as f:
                return f.read()
        with open(p, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory") from None
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise UsageError(f"{p}: cannot read: {e}") from None


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write via a temporary file in the same directory, then rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, mode, **({} if isinstance(text, bytes) else {"encoding": "utf-8"})) as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_module(path: str | os.PathLike):
    from .parser import parse_module
    return parse_module(read_text(path), str(path))
