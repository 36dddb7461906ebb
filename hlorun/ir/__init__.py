"""The HLO IR: shapes, instructions, computations, modules."""

from .module import Computation, Instruction, Module
from .shape import Layout, Shape

__all__ = ["Computation", "Instruction", "Layout", "Module", "Shape"]
