"""What the ``run`` / ``compare`` / ``compile --check-numerics`` commands
share: building the argument list from ``--input`` options and a seed,
parsing ``--max-bytes``, summarizing outputs, saving them.
"""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import numpy as np

from ..ir.module import Module
from ..errors import UsageError
from .dtypes import _ML_FLOAT_NAMES, _ML_INT_NAMES
from .inputs import coerce_input, random_inputs
from .registry import EvaluationError


def parse_bytes(text: str | int | None) -> int | None:
    """``4G``, ``512M``, ``1.5GiB``, ``1000000`` -> bytes; ``none``/``0`` -> no limit."""
    if text is None:
        return None
    if isinstance(text, int):
        return text or None
    t = text.strip().lower()
    if t in ("none", "inf", "0", "unlimited"):
        return None
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?", t)
    if not m:
        raise UsageError(f"--max-bytes: cannot read '{text}' (use e.g. 4G, 512M, 1000000)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _param_index(module: Module, name: str) -> int:
    entry = module.entry
    params = entry.parameters
    if name.isdigit():
        i = int(name)
        if i < len(params):
            return i
    for p in params:
        if p is not None and (p.name == name or p.name == name.lstrip("%")):
            return p.parameter_number
    names = ", ".join(f"{p.name} ({p.parameter_number})" for p in params if p is not None)
    raise UsageError(f"--input {name}: no such parameter; the entry takes: {names}")


def load_array_file(path: str) -> dict[str, np.ndarray] | np.ndarray:
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read as .npy/.npz: {e}") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            return {k: data[k] for k in data.files}
    return data


def build_inputs(module: Module, specs: Sequence[str] = (), seed: int = 0) -> list[Any]:
    """Seeded random arguments, replaced by files where ``specs`` say
    ``NAME=FILE.npy`` (NAME: parameter name or number) or ``FILE.npz``
    (arrays named after parameters or ``arg0``, ``arg1`` ...)."""
    args = random_inputs(module, seed)
    params = module.entry.parameters
    for spec in specs:
        if "=" in spec:
            name, path = spec.split("=", 1)
            idx = _param_index(module, name.strip())
            value = load_array_file(path)
            if isinstance(value, dict):
                raise UsageError(f"--input {spec}: expected a .npy file for one parameter")
            args[idx] = coerce_input(value, params[idx].shape, f"--input {name}")
            continue
        value = load_array_file(spec)
        if not isinstance(value, dict):
            raise UsageError(f"--input {spec}: give NAME=FILE.npy, or a .npz file with named arrays")
        for key, arr in value.items():
            k = key[3:] if re.fullmatch(r"arg\d+", key) else key
            idx = _param_index(module, k)
            args[idx] = coerce_input(arr, params[idx].shape, f"--input {spec}:{key}")
    return args


def leaves(value: Any, index: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    if isinstance(value, tuple):
        out = []
        for i, v in enumerate(value):
            out.extend(leaves(v, index + (i,)))
        return out
    return [(index, value)]


def summarize(value: Any, types: Sequence[str], n_values: int = 5) -> list[dict]:
    """Per output leaf: index, type, shape, min/max/mean, nan/inf counts,
    the first values."""
    out = []
    for k, (idx, v) in enumerate(leaves(value)):
        t = types[k] if k < len(types) else ""
        if v is None:
            out.append({"output": list(idx), "type": t, "shape": [], "values": []})
            continue
        a = np.asarray(v)
        row: dict[str, Any] = {"output": list(idx), "type": t, "shape": list(a.shape)}
        if a.size:
            if a.dtype.kind == "c":
                f = np.abs(a.astype(np.complex128))
            elif a.dtype == np.bool_:
                f = a.astype(np.float64)
            else:
                f = a.astype(np.float64)
            finite = f[np.isfinite(f)]
            row["min"] = float(finite.min()) if finite.size else None
            row["max"] = float(finite.max()) if finite.size else None
            row["mean"] = float(finite.mean()) if finite.size else None
            row["nan"] = int(np.isnan(f).sum())
            row["inf"] = int(np.isinf(f).sum())
            flat = a.reshape(-1)[:n_values]
            if a.dtype == np.bool_:
                row["values"] = [bool(x) for x in flat]
            elif a.dtype.kind in "iu":
                row["values"] = [int(x) for x in flat]
            elif a.dtype.kind == "c":
                row["values"] = [str(complex(x)) for x in flat]
            else:
                row["values"] = [float(x) for x in flat.astype(np.float64)]
        else:
            row["values"] = []
        out.append(row)
    return out


def savable(a: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays (bf16, fp8 -> f32; int4 -> int8) for .npz files,
    which numpy cannot read back otherwise."""
    a = np.asarray(a)
    if a.dtype.name in _ML_FLOAT_NAMES:
        return a.astype(np.float32)
    if a.dtype.name in _ML_INT_NAMES:
        return a.astype(np.int8 if a.dtype.name.startswith("int") else np.uint8)
    return a


def npz_bytes(value: Any) -> bytes:
    arrays = {}
    ls = leaves(value)
    for idx, v in ls:
        if v is None:
            continue
        name = "output" if not idx else "output_" + "_".join(map(str, idx))
        arrays[name] = savable(v)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def check_same_signature(a: Module, b: Module) -> None:
    pa = [p.shape for p in a.entry.parameters]
    pb = [p.shape for p in b.entry.parameters]
    if len(pa) != len(pb):
        raise EvaluationError(f"the modules take {len(pa)} and {len(pb)} parameters")
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x.to_string(False) != y.to_string(False):
            raise EvaluationError(f"parameter {i} differs: {x.to_string(False)} vs {y.to_string(False)}")
