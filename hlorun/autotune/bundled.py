"""Where the autotuner's data files are: ``hlorun/autotune/data`` in the
package, read through ``importlib.resources`` so that a zipped wheel works
too, or any other directory a caller names (fits, tests, cross-validation)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


def data_file(data_dir: str | Path, filename: str):
    """``filename`` in ``data_dir``: a ``Path``, or for the bundled
    directory an ``importlib.resources`` Traversable (``is_file``,
    ``read_text`` and ``open`` work on both)."""
    if Path(data_dir) == DATA_DIR:
        from importlib import resources
        return resources.files(__package__).joinpath("data", filename)
    return Path(data_dir) / filename
