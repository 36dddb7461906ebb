"""Reading inputs and writing outputs safely.

Reading: ``-`` is stdin; gzip and xz files (XLA users keep dumps compressed)
are decompressed transparently, recognised by their magic bytes whatever the
name; a corrupt or truncated archive is a one-line error, not a traceback.

Writing (``write_atomic``):

* ``-`` writes to stdout;
* a target that exists and is not a regular file (``/dev/null``, a FIFO, a
  terminal) is opened and written through, never renamed over, so it stays
  what it was;
* a regular file is written to a temporary file beside it and renamed into
  place: an interrupted run (Ctrl-C) leaves no partial output and the old
  file intact.  A symlink is followed (the link stays a link);
* new files get ``0666 & ~umask`` (an existing file keeps its mode);
* a location that cannot be written is a clear error (exit 1).

``refuse_overwrite(output, inputs)`` is the check every writing command
makes before it starts: an output must never be one of the inputs.
"""

from __future__ import annotations

import gzip
import lzma
import os
import stat
import sys
import tempfile
import zlib
from pathlib import Path

from ..errors import UsageError

_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"


def _decompress(data: bytes, p: str) -> bytes:
    try:
        if data.startswith(_GZIP_MAGIC):
            return gzip.decompress(data)
        if data.startswith(_XZ_MAGIC):
            return lzma.decompress(data)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
        kind = "gzip" if data.startswith(_GZIP_MAGIC) else "xz"
        why = str(e) or type(e).__name__
        if isinstance(e, EOFError):
            why = "truncated (compressed data ends early)"
        raise UsageError(f"{p}: corrupt {kind} file: {why}") from None
    return data


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes (``-``: stdin), decompressed if gzip or xz."""
    p = str(path)
    if p == "-":
        return _decompress(sys.stdin.buffer.read(), "<stdin>")
    try:
        with open(p, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory") from None
    except OSError as e:
        raise UsageError(f"{p}: cannot read: {e.strerror or e}") from None
    return _decompress(data, p)


def read_text(path: str | os.PathLike) -> str:
    """An input file as text (``-``: stdin; gzip/xz decompressed)."""
    p = "<stdin>" if str(path) == "-" else str(path)
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); "
                         "is it a binary file (an .hlo.pb proto)?") from None


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwrite(output: str | os.PathLike | None, inputs, what: str = "-o") -> None:
    """UsageError if ``output`` names one of ``inputs`` (a path or an
    iterable of paths; ``-`` and None are skipped)."""
    if output is None or str(output) == "-":
        return
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for inp in inputs:
        if inp is None or str(inp) == "-":
            continue
        if _same_file(str(output), str(inp)):
            raise UsageError(f"refusing to overwrite the input {inp}; pick another {what}")


def write_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write an output safely (see the module doc)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    p = str(path)
    if p == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    real = os.path.realpath(p)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"{p}: cannot write: {e.strerror or e}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{p}: is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(real, p, data)
        return
    parent = Path(real).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{p}: cannot create the directory {parent}: {e.strerror or e}") from None
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{Path(real).name}.", suffix=".tmp", dir=str(parent))
    except OSError as e:
        raise UsageError(f"{p}: cannot write in {parent}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise UsageError(f"{p}: cannot write: {e.strerror or e}") from None
        raise


def _write_through(real: str, p: str, data: bytes) -> None:
    """A device, FIFO or socket: open it and write, leaving the node alone."""
    try:
        with open(real, "wb") as f:
            f.write(data)
    except OSError as e:
        raise UsageError(f"{p}: cannot write: {e.strerror or e}") from None


def check_dump_dir(path: str | os.PathLike, overwrite: bool = False) -> None:
    """``--dump-to DIR`` must be a new or empty directory, so two runs' dumps
    never mix silently (XLA itself writes over whatever is there).  With
    ``overwrite`` the run writes into it anyway, replacing same-named files."""
    p = str(path)
    if not os.path.exists(p):
        return
    if not os.path.isdir(p):
        raise UsageError(f"--dump-to {p}: exists and is not a directory")
    if overwrite:
        return
    try:
        n = sum(1 for _ in os.scandir(p))
    except OSError as e:
        raise UsageError(f"--dump-to {p}: cannot read: {e.strerror or e}") from None
    if n:
        raise UsageError(f"--dump-to {p}: directory is not empty ({n} entries from an earlier "
                         "run?); pick a new directory, or pass --overwrite-dump to write into it "
                         "(same-named files are replaced, others kept)")
