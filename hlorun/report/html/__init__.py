"""The self-contained HTML report of a compile (``hlorun compile --html``,
``hlorun report``): a pass timeline with lazy diffs, instruction following,
violations, the final kernels as a graph, autotuner decisions and buffers.

    import hlorun
    from hlorun.report.html import write_html
    r = hlorun.compile("model.hlo", diffs="changed")
    write_html(r, "report.html")
"""

from __future__ import annotations

import os
from typing import Any


def html_from_result(result, *, input_name: str | None = None) -> str:
    from .data import from_result
    from .render import render
    return render(from_result(result, input_name=input_name))


def html_from_json(doc: dict[str, Any]) -> str:
    from .data import from_json
    from .render import render
    return render(from_json(doc))


def write_html(result, path: str | os.PathLike, *, input_name: str | None = None) -> None:
    from ...text.fileio import write_atomic
    write_atomic(path, html_from_result(result, input_name=input_name))


__all__ = ["html_from_json", "html_from_result", "write_html"]
