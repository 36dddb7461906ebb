"""The Model Explorer adapter extension (Model Explorer imports
``<extension module>.main`` and registers the Adapter subclasses it defines)."""

from __future__ import annotations

from typing import Any

from model_explorer import Adapter, AdapterMetadata

from . import to_graphs


class HloAdapter(Adapter):
    """HLO text (.hlo, .txt, .gz, .xz) -> one graph per control
    computation, fusions as collapsible layers, op_name scopes as layers."""

    metadata = AdapterMetadata(
        id="hlorun_hlo",
        name="HLO text adapter (hlorun)",
        description="XLA HLO text modules, parsed by hlorun.",
        source_repo="hlorun",
        fileExts=["hlo", "txt", "gz", "xz"],
    )

    def __init__(self):
        super().__init__()

    def convert(self, model_path: str, settings: dict) -> dict[str, Any]:
        from ..text.parser import load_module
        from .convert import convert
        return to_graphs(convert(load_module(model_path)))


__all__ = ["HloAdapter"]
