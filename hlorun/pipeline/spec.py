"""Pipeline specifications: the YAML format, loaded and validated up front.

A pipeline file (``hlorun/pipelines/*.yaml``; the format is documented in
hlorun/pipelines/README.md) declares::

    name: gpu-cuda
    description: ...
    include: [base]                # optional: start from other pipelines
    target: {platform: cuda, device: H100, compute_capability: "9.0"}
    checkers: [hlo-verifier, {some-checker: {option: 1}}]
    custom_call_targets: {...}     # sections other components read
    steps:
      - pipeline: simplification   # a named sub-pipeline (XLA HloPassPipeline)
        fixed_point: true          # run to a fixed point (HloPassFix), max_iterations: 25
        checkers: [...]            # only inside this sub-pipeline
        steps:
          - dce                                  # a pass, default options
          - cse: {is_layout_sensitive: true}     # a pass with options
          - pass: algsimp                        # long form
            options: {...}
            fixed_point: true                    # HloPassFix<pass>
          - check: reshape-is-bitcast            # a precondition checked here
          - include: other-pipeline              # splice another file's steps
            select: some-sub-pipeline            # (or just one of its sub-pipelines)

Everything is checked before any pass runs (:mod:`hlorun.pipeline.loader`):
unknown passes, checkers, options and keys are errors that name the YAML
file:line:column and the closest known names; option values are checked
against the pass's dataclass field types.  Loading uses PyYAML's SafeLoader
only (:mod:`hlorun.pipeline.yaml_source`).

Finding and loading pipelines (``load_pipeline`` by name or path,
``parse_pipeline`` from text) live in :mod:`hlorun.pipeline.loader`; here:
:func:`pipeline_from_passes` (``dce,cse{is_layout_sensitive=true}``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterator, Union

from ..passes import REGISTRY, pass_class
from ..passes.base import Pass, Target
from ..errors import UsageError
from .spec_types import check_value, did_you_mean, option_fields, type_hints
from .yaml_source import Loc

DEFAULT_PIPELINE = "gpu-cuda"
DEFAULT_MAX_ITERATIONS = 25  # XLA's HloPassFix kDefaultIterationLimit

#: Top-level sections other components read (``spec.section(name)``):
#: name -> "module:function" validator taking (value, loc, text) and raising
#: YamlError, or None (any YAML mapping is accepted).  Add yours here.
SECTIONS: dict[str, str | None] = {
    "autotune": None,
    "custom_call_targets": "hlorun.buffers.targets:validate_targets_section",
}


@dataclass
class CheckerSpec:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    loc: Loc | None = None

    def instantiate(self, spec: "PipelineSpec | None" = None):
        from ..verifier.checkers import checker_class
        cls = checker_class(self.name)
        hook = getattr(cls, "from_pipeline", None)
        if hook is not None:
            return hook(spec, dict(self.options))
        return cls(**self.options)

    def to_yaml(self) -> Any:
        return {self.name: dict(self.options)} if self.options else self.name


@dataclass
class PassStep:
    """One pass with its options (validated and converted)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    loc: Loc | None = None
    fixed_point: bool = False
    max_iterations: int = DEFAULT_MAX_ITERATIONS

    kind = "pass"

    @property
    def cls(self) -> type[Pass]:
        return pass_class(self.name)

    def instantiate(self, target: Target, spec: "PipelineSpec | None" = None) -> Pass:
        cls = self.cls
        hook = getattr(cls, "from_pipeline", None)
        if hook is not None:
            return hook(spec, dict(self.options), target)
        return cls(target=target, **self.options)

    def label(self) -> str:
        if not self.options:
            return self.name
        return self.name + "{" + ",".join(f"{k}={_fmt(v)}" for k, v in self.options.items()) + "}"

    def to_yaml(self) -> Any:
        if self.fixed_point:
            d: dict[str, Any] = {"pass": self.name}
            if self.options:
                d["options"] = dict(self.options)
            d["fixed_point"] = True
            if self.max_iterations != DEFAULT_MAX_ITERATIONS:
                d["max_iterations"] = self.max_iterations
            return d
        return {self.name: _plain(self.options)} if self.options else self.name


@dataclass
class CheckStep:
    """A checker run at this point (a precondition of what follows)."""

    checker: CheckerSpec
    loc: Loc | None = None

    kind = "check"

    @property
    def name(self) -> str:
        return self.checker.name

    def to_yaml(self) -> Any:
        d: dict[str, Any] = {"check": self.checker.name}
        if self.checker.options:
            d["options"] = dict(self.checker.options)
        return d


@dataclass
class PipelineStep:
    """A named sub-pipeline (XLA HloPassPipeline); with ``fixed_point`` an
    HloPassFix<HloPassPipeline> that reruns until nothing changes."""

    name: str
    steps: list["Step"] = field(default_factory=list)
    loc: Loc | None = None
    fixed_point: bool = False
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    checkers: list[CheckerSpec] = field(default_factory=list)
    description: str = ""
    # XLA pipelines built without AddInvariantChecker (RunLayoutNormalization-
    # Passes): the checkers do not run after this sub-pipeline's passes, only
    # once when it ends (where XLA's next pipeline checks at its start)
    checkers_at_end: bool = False

    kind = "pipeline"

    def to_yaml(self) -> Any:
        d: dict[str, Any] = {"pipeline": self.name}
        if self.description:
            d["description"] = self.description
        if self.fixed_point:
            d["fixed_point"] = True
            if self.max_iterations != DEFAULT_MAX_ITERATIONS:
                d["max_iterations"] = self.max_iterations
        if self.checkers:
            d["checkers"] = [c.to_yaml() for c in self.checkers]
        if self.checkers_at_end:
            d["checkers_at_end"] = True
        d["steps"] = [s.to_yaml() for s in self.steps]
        return d


Step = Union[PassStep, PipelineStep, CheckStep]


@dataclass
class PipelineSpec:
    """A loaded, validated pipeline."""

    name: str
    steps: list[Step] = field(default_factory=list)
    checkers: list[CheckerSpec] = field(default_factory=list)
    target: Target = field(default_factory=Target)
    sections: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    path: str | None = None
    includes: list[str] = field(default_factory=list)

    def section(self, name: str, default: Any = None) -> Any:
        """A top-level section (``custom_call_targets``, ``autotune`` ...)."""
        return self.sections.get(name, default)

    def walk(self) -> Iterator[tuple[tuple[str, ...], Step]]:
        """Every step in document order with the names of its enclosing
        sub-pipelines (top-level passes are inside the pipeline's own name)."""
        def rec(steps, prefix):
            for s in steps:
                yield prefix, s
                if isinstance(s, PipelineStep):
                    yield from rec(s.steps, prefix + (s.name,))
        for s in self.steps:
            prefix = () if isinstance(s, PipelineStep) else (self.name,)
            yield prefix, s
            if isinstance(s, PipelineStep):
                yield from rec(s.steps, (s.name,))

    def passes(self) -> list[PassStep]:
        return [s for _, s in self.walk() if isinstance(s, PassStep)]

    def with_target(self, **overrides: Any) -> "PipelineSpec":
        kw = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, target=replace(self.target, **kw)) if kw else self

    def to_yaml(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        d["target"] = {f.name: getattr(self.target, f.name) for f in fields(Target)}
        if self.checkers:
            d["checkers"] = [c.to_yaml() for c in self.checkers]
        for k, v in self.sections.items():
            d[k] = _plain(v)
        d["steps"] = [s.to_yaml() for s in self.steps]
        return d

    def dump_yaml(self) -> str:
        import yaml
        return yaml.safe_dump(self.to_yaml(), sort_keys=False, default_flow_style=False)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


# ---------------------------------------------------------------------------
# --passes=a,b{opt=v}
# ---------------------------------------------------------------------------


def parse_pass_list(text: str) -> list[PassStep]:
    """``dce,cse{is_layout_sensitive=true},tuple-simplifier``: passes with
    options as in ``hlo-opt --passes`` (values are YAML scalars or lists)."""
    import yaml
    steps = []
    for item in _split_passes(text):
        item = item.strip()
        if not item:
            continue
        opts: dict[str, Any] = {}
        name = item
        if "{" in item:
            if not item.endswith("}"):
                raise UsageError(f"--passes: '{item}': options go in braces at the end: name{{opt=v}}")
            name, body = item[:-1].split("{", 1)
            for kv in _split_passes(body):
                if not kv.strip():
                    continue
                if "=" not in kv:
                    raise UsageError(f"--passes: '{kv}' in '{item}' is not option=value")
                k, raw = kv.split("=", 1)
                try:
                    opts[k.strip()] = yaml.safe_load(raw.strip()) if raw.strip() else ""
                except yaml.YAMLError:
                    opts[k.strip()] = raw.strip()
        name = name.strip()
        if name not in REGISTRY:
            raise UsageError(f"--passes: unknown pass '{name}'{did_you_mean(name, REGISTRY)}")
        cls = pass_class(name)
        known = option_fields(cls)
        hints = type_hints(cls)
        checked = {}
        for k, v in opts.items():
            if k not in known:
                raise UsageError(f"--passes: pass '{name}' has no option '{k}'"
                                 f"{did_you_mean(k, known)} (options: {', '.join(known) or 'none'})")
            try:
                checked[k] = check_value(v, hints.get(k))
            except (TypeError, ValueError) as e:
                raise UsageError(f"--passes: option '{k}' of pass '{name}': {e}") from None
        steps.append(PassStep(name, checked))
    if not steps:
        raise UsageError("--passes: no passes given")
    return steps


def _split_passes(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def pipeline_from_passes(text_or_steps: str | list[PassStep], name: str = "opt",
                         checkers: list[str] | None = None,
                         target: Target | None = None) -> PipelineSpec:
    """A one-level pipeline of the given passes (``hlorun opt``)."""
    steps = parse_pass_list(text_or_steps) if isinstance(text_or_steps, str) else text_or_steps
    return PipelineSpec(name=name, steps=list(steps),
                        checkers=[CheckerSpec(c) for c in (checkers or [])],
                        target=target or Target())


__all__ = ["CheckStep", "CheckerSpec", "DEFAULT_MAX_ITERATIONS", "DEFAULT_PIPELINE", "PassStep",
           "PipelineSpec", "PipelineStep", "SECTIONS", "Step", "option_fields", "parse_pass_list",
           "pipeline_from_passes"]
