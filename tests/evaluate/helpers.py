"""Small helpers shared by the evaluator tests."""

from __future__ import annotations

import numpy as np

from hlorun.evaluate import Evaluator
from hlorun.text.parser import parse_module


def run_hlo(text: str, *args, max_bytes=None):
    module = parse_module(text, "test.hlo")
    return Evaluator(module, max_bytes=max_bytes).evaluate([np.asarray(a) for a in args])


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(*shape, seed=0, lo=-1.0, hi=1.0):
    return rng(seed).uniform(lo, hi, shape).astype(np.float32)
