"""Local absolute paths out of everything a bug report bundle holds."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Sequence

_ABS_QUOTED = re.compile(r'"(/[^"\n]*?)"')
#: An absolute path not under a known root (the last resort of Scrubber.text).
_ABS_PATH = re.compile(r"(?<![\w.~<>)\]/])/(?:[A-Za-z0-9_.+@-]+/)+([A-Za-z0-9_.+@-]*)")


class Scrubber:
    """Rewrites local absolute paths: the bundle's own staging directory
    becomes relative, the input's directory and the working directory
    vanish, and any other absolute path (a temporary directory, a home
    directory, an installed pipeline) keeps only its file name; quoted
    absolute paths in HLO metadata keep only their file name too."""

    def __init__(self, staging: Path | None, extra: Sequence[tuple[str, str]] = ()):
        roots: list[tuple[str, str]] = []
        if staging is not None:
            roots.append((str(staging.resolve()) + os.sep, ""))
            roots.append((str(staging.resolve()), "."))
        roots += list(extra)
        roots.append((str(Path.cwd().resolve()) + os.sep, ""))
        seen = set()
        self.roots = []
        for a, b in sorted(roots, key=lambda r: -len(r[0])):
            if a not in seen and len(a) > 1:
                seen.add(a)
                self.roots.append((a, b))

    def _roots(self, text: str) -> str:
        for a, b in self.roots:
            if a in text:
                text = text.replace(a, b)
        return text

    def text(self, text: str) -> str:
        """Known roots replaced, then any other absolute path down to its
        file name."""
        return _ABS_PATH.sub(lambda m: m.group(1) or ".", self._roots(text))

    def module(self, text: str) -> str:
        """HLO text: known roots replaced, then any remaining quoted
        absolute path (``source_file="/home/..."``) down to its file name."""
        return _ABS_QUOTED.sub(lambda m: '"' + m.group(1).rsplit("/", 1)[-1] + '"', self._roots(text))

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        return v


__all__ = ["Scrubber"]
