"""``hlorun reduce``: shrink a module while a condition still holds.

* :mod:`.compile_config` -- the compile the candidates are judged with
  (parsed by the compile command's own click parser, run in-process);
* :mod:`.conditions` -- ``--until`` conditions and ``--until-cmd``;
* :mod:`.strategies` -- what can be cut (outputs, instructions, calls,
  dimensions, attributes, layouts, names);
* :mod:`.driver` -- delta debugging over the strategies' units, with a
  cache, a size order, verification, budget, flakiness check and the best
  result always on disk.
"""

from __future__ import annotations

from .compile_config import CompileConfig
from .conditions import Condition, Verdict, parse_condition
from .driver import ReduceOptions, ReduceResult, Reducer, reduce_text

__all__ = ["CompileConfig", "Condition", "ReduceOptions", "ReduceResult", "Reducer", "Verdict",
           "parse_condition", "reduce_text"]
