"""Pipeline specifications: the YAML format, loaded and validated up front.

A pipeline file (``pipelines/*.yaml``; the format is documented in
pipelines/README.md) declares::

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

Everything is checked before any pass runs: unknown passes, checkers,
options and keys are errors that name the YAML file:line:column and the
closest known names; option values are checked against the pass's dataclass
field types.  Loading uses PyYAML's SafeLoader only (``yaml_source``).

Python API: :func:`load_pipeline` (name or path), :func:`parse_pipeline`
(text), :func:`pipeline_from_passes` (``dce,cse{is_layout_sensitive=true}``).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterator, Union

from .passes import REGISTRY, pass_class
from .passes.base import Pass, Target
from .source import UsageError
from .spec_types import check_value, type_hints
from .yaml_source import LMap, Loc, LSeq, YamlError, load_located, loc_of

DEFAULT_PIPELINE = "gpu-cuda"
DEFAULT_MAX_ITERATIONS = 25  # XLA's HloPassFix kDefaultIterationLimit

#: Top-level sections other components read (``spec.section(name)``):
#: name -> "module:function" validator taking (value, loc, text) and raising
#: YamlError, or None (any YAML mapping is accepted).  Add yours here.
SECTIONS: dict[str, str | None] = {
    "autotune": None,
    "custom_call_targets": "hlorun.buffers.alias_rules:validate_targets_section",
}
_TOP_KEYS = ("name", "description", "include", "target", "checkers", "steps")
_PIPELINE_KEYS = ("pipeline", "steps", "fixed_point", "max_iterations", "checkers", "description")
_PASS_KEYS = ("pass", "options", "fixed_point", "max_iterations")


@dataclass
class CheckerSpec:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    loc: Loc | None = None

    def instantiate(self, spec: "PipelineSpec | None" = None):
        from .verify import checker_class
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


# ---------------------------------------------------------------------------
# Finding pipelines
# ---------------------------------------------------------------------------


def bundled_dir() -> Path:
    """The bundled ``pipelines/`` directory (checkout or installed wheel)."""
    local = Path(__file__).resolve().parent.parent / "pipelines"
    if local.is_dir():
        return local
    from importlib import resources
    return Path(str(resources.files("hlorun.pipelines")))


def bundled_pipelines() -> dict[str, Path]:
    d = bundled_dir()
    return {p.stem: p for p in sorted(d.glob("*.yaml"))} if d.is_dir() else {}


def resolve_pipeline(name_or_path: str, relative_to: Path | None = None) -> Path:
    p = Path(name_or_path)
    candidates = []
    if relative_to is not None and not p.is_absolute():
        candidates.append(relative_to / p)
    candidates.append(p)
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path or "/" in name_or_path:
        for c in candidates:
            if c.is_file():
                return c
        if relative_to is None or p.is_absolute():
            raise UsageError(f"pipeline file {name_or_path} does not exist")
    if relative_to is not None:
        for ext in (".yaml", ".yml"):
            c = relative_to / (name_or_path + ext)
            if c.is_file():
                return c
    bundled = bundled_pipelines()
    if name_or_path in bundled:
        return bundled[name_or_path]
    if p.is_file():
        return p
    near = difflib.get_close_matches(name_or_path, list(bundled), n=3, cutoff=0.5)
    raise UsageError(f"unknown pipeline '{name_or_path}'"
                     + (f"; did you mean {', '.join(near)}?" if near else "")
                     + f" (bundled: {', '.join(bundled) or 'none'})")


def load_pipeline(name_or_path: str | None = None) -> PipelineSpec:
    """Load a bundled pipeline by name or a YAML file by path (default:
    the bundled GPU/CUDA pipeline)."""
    path = resolve_pipeline(name_or_path or DEFAULT_PIPELINE)
    return _Loader().load_file(path)


def parse_pipeline(text: str, filename: str = "<pipeline>") -> PipelineSpec:
    return _Loader().load_text(text, filename, Path(filename).parent if filename else None)


# ---------------------------------------------------------------------------
# The loader
# ---------------------------------------------------------------------------


def _near(name: str, choices, n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.5)


def _did_you_mean(near: list[str]) -> str:
    return f"; did you mean {', '.join(near)}?" if near else ""


class _Loader:
    def __init__(self) -> None:
        self.stack: list[Path] = []
        self.text = ""

    def err(self, message: str, loc: Loc | None, notes: list[str] | None = None) -> YamlError:
        return YamlError(message, loc, self._text_for(loc), notes)

    def _text_for(self, loc: Loc | None) -> str | None:
        if loc is None or loc.filename is None:
            return self.text
        try:
            return Path(loc.filename).read_text(encoding="utf-8")
        except OSError:
            return self.text

    def load_file(self, path: Path, loc: Loc | None = None) -> PipelineSpec:
        rp = path.resolve()
        if rp in self.stack:
            chain = " -> ".join(p.name for p in self.stack + [rp])
            raise self.err(f"include cycle: {chain}", loc)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{path}: cannot read: {e}") from None
        self.stack.append(rp)
        try:
            return self.load_text(text, str(path), path.parent)
        finally:
            self.stack.pop()

    def load_text(self, text: str, filename: str, base: Path | None) -> PipelineSpec:
        saved = self.text
        self.text = text
        try:
            return self._load(text, filename, base)
        finally:
            self.text = saved

    def _load(self, text: str, filename: str, base: Path | None) -> PipelineSpec:
        data = load_located(text, filename)
        if not isinstance(data, LMap):
            raise self.err("a pipeline file must be a YAML mapping with 'name' and 'steps'",
                           loc_of(data) or Loc(filename, 1, 1))
        for key in data:
            if key not in _TOP_KEYS and key not in SECTIONS:
                choices = list(_TOP_KEYS) + list(SECTIONS)
                raise self.err(f"unknown top-level key '{key}'{_did_you_mean(_near(str(key), choices))}",
                               data.loc_of(key), [f"known keys: {', '.join(choices)}"])
        spec = PipelineSpec(name=Path(filename).stem, path=filename)
        for inc_name, inc_loc in self._list_of_str(data, "include"):
            inc = self.load_file(self._resolve(inc_name, base, inc_loc), inc_loc)
            spec = _merge(spec, inc)
            spec.includes.append(inc.path or inc_name)
        if "name" in data:
            spec.name = self._str(data, "name")
        else:
            spec.name = Path(filename).stem
        if "description" in data:
            spec.description = self._str(data, "description")
        if "target" in data:
            spec.target = self._target(data["target"], data.value_loc("target"), spec.target)
        if "checkers" in data:
            own = self._checkers(data["checkers"], data.value_loc("checkers"))
            names = {c.name for c in own}
            spec.checkers = [c for c in spec.checkers if c.name not in names] + own
        for sec in SECTIONS:
            if sec in data:
                spec.sections[sec] = _deep_merge(spec.sections.get(sec), self._section(
                    sec, data[sec], data.value_loc(sec)))
        if "steps" in data:
            spec.steps = self._steps(data["steps"], data.value_loc("steps"), base, spec.name)
        elif not spec.steps:
            raise self.err("a pipeline needs 'steps' (or an 'include' that has them)", data.loc)
        spec.path = filename
        return spec

    # -- scalars -------------------------------------------------------------------
    def _str(self, m: LMap, key: str) -> str:
        v = m[key]
        if not isinstance(v, str) or not v:
            raise self.err(f"'{key}' must be a non-empty string", m.value_loc(key))
        return v

    def _list_of_str(self, m: LMap, key: str) -> list[tuple[str, Loc]]:
        if key not in m:
            return []
        v = m[key]
        if isinstance(v, str):
            return [(v, m.value_loc(key))]
        if isinstance(v, LSeq) and all(isinstance(x, str) for x in v):
            return list(zip(v, v.locs))
        raise self.err(f"'{key}' must be a name or a list of names", m.value_loc(key))

    def _resolve(self, name: str, base: Path | None, loc: Loc) -> Path:
        try:
            return resolve_pipeline(name, base)
        except UsageError as e:
            raise self.err(str(e), loc) from None

    def _target(self, v: Any, loc: Loc, base: Target) -> Target:
        if not isinstance(v, LMap):
            raise self.err("'target' must be a mapping (platform, device, compute_capability)", loc)
        known = [f.name for f in fields(Target)]
        kw = {}
        for k, val in v.items():
            if k not in known:
                raise self.err(f"unknown target field '{k}'{_did_you_mean(_near(str(k), known))}",
                               v.loc_of(k), [f"fields: {', '.join(known)}"])
            if not isinstance(val, str):
                hint = f' (quote it: "{val}")' if isinstance(val, (int, float)) else ""
                raise self.err(f"target {k} must be a string{hint}", v.value_loc(k))
            kw[k] = val
        return replace(base, **kw)

    def _section(self, name: str, v: Any, loc: Loc) -> Any:
        validator = SECTIONS.get(name)
        if validator:
            from importlib import import_module
            mod, attr = validator.split(":")
            getattr(import_module(mod), attr)(v, loc, self.text)
        return _plain(v)

    # -- checkers --------------------------------------------------------------------
    def _checkers(self, v: Any, loc: Loc) -> list[CheckerSpec]:
        if not isinstance(v, LSeq):
            raise self.err("'checkers' must be a list", loc)
        out = []
        for item, iloc in zip(v, v.locs):
            if isinstance(item, str):
                out.append(self._checker(item, None, iloc, iloc))
            elif isinstance(item, LMap) and len(item) == 1:
                (name, opts), = item.items()
                out.append(self._checker(str(name), opts, item.loc_of(name), item.value_loc(name)))
            else:
                raise self.err("a checker is a name or '{name: {options}}'", iloc)
        return out

    def _checker(self, name: str, opts: Any, loc: Loc, oloc: Loc) -> CheckerSpec:
        from .verify import CHECKERS, checker_class
        if name not in CHECKERS:
            raise self.err(f"unknown checker '{name}'{_did_you_mean(_near(name, CHECKERS))}", loc,
                           [f"registered checkers: {', '.join(sorted(CHECKERS))}"])
        options = self._options(checker_class(name), opts, oloc, f"checker '{name}'",
                                skip=("name",))
        return CheckerSpec(name, options, loc)

    # -- steps ------------------------------------------------------------------------
    def _steps(self, v: Any, loc: Loc, base: Path | None, owner: str) -> list[Step]:
        if not isinstance(v, LSeq):
            raise self.err(f"'steps' of {owner} must be a list", loc)
        out: list[Step] = []
        for item, iloc in zip(v, v.locs):
            out.extend(self._step(item, iloc, base))
        return out

    def _step(self, item: Any, loc: Loc, base: Path | None) -> list[Step]:
        if isinstance(item, str):
            return [self._pass(item, None, loc, loc)]
        if not isinstance(item, LMap) or not item:
            raise self.err("a step is a pass name, '{pass: {options}}', or a mapping with "
                           "'pipeline', 'pass', 'check' or 'include'", loc)
        if "pipeline" in item:
            return [self._pipeline_step(item, base)]
        if "pass" in item:
            return [self._long_pass(item)]
        if "check" in item:
            return [self._check_step(item)]
        if "include" in item:
            return self._include_step(item, base)
        if len(item) == 1:
            (name, opts), = item.items()
            return [self._pass(str(name), opts, item.loc_of(name), item.value_loc(name))]
        keys = ", ".join(str(k) for k in item)
        raise self.err(f"cannot tell what this step is (keys: {keys}); a pass with options is "
                       f"written '- name: {{option: value}}'", item.loc)

    def _check_keys(self, item: LMap, allowed: tuple[str, ...], what: str) -> None:
        for k in item:
            if k not in allowed:
                raise self.err(f"unknown key '{k}' in {what}{_did_you_mean(_near(str(k), allowed))}",
                               item.loc_of(k), [f"allowed: {', '.join(allowed)}"])

    def _fixed_point(self, item: LMap) -> tuple[bool, int]:
        fp = item.get("fixed_point", False)
        if not isinstance(fp, bool):
            raise self.err("'fixed_point' must be true or false", item.value_loc("fixed_point"))
        n = item.get("max_iterations", DEFAULT_MAX_ITERATIONS)
        if "max_iterations" in item:
            if not fp:
                raise self.err("'max_iterations' needs 'fixed_point: true'",
                               item.loc_of("max_iterations"))
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise self.err("'max_iterations' must be a positive integer",
                               item.value_loc("max_iterations"))
        return fp, n

    def _pipeline_step(self, item: LMap, base: Path | None) -> PipelineStep:
        self._check_keys(item, _PIPELINE_KEYS, "a sub-pipeline")
        name = self._str(item, "pipeline")
        if "steps" not in item:
            raise self.err(f"sub-pipeline '{name}' needs 'steps'", item.loc)
        fp, n = self._fixed_point(item)
        checkers = self._checkers(item["checkers"], item.value_loc("checkers")) \
            if "checkers" in item else []
        desc = self._str(item, "description") if "description" in item else ""
        steps = self._steps(item["steps"], item.value_loc("steps"), base, f"'{name}'")
        return PipelineStep(name, steps, item.loc_of("pipeline"), fp, n, checkers, desc)

    def _long_pass(self, item: LMap) -> PassStep:
        self._check_keys(item, _PASS_KEYS, "a pass step")
        name = self._str(item, "pass")
        step = self._pass(name, item.get("options"), item.value_loc("pass"),
                          item.value_loc("options") if "options" in item else item.loc)
        step.fixed_point, step.max_iterations = self._fixed_point(item)
        return step

    def _check_step(self, item: LMap) -> CheckStep:
        self._check_keys(item, ("check", "options"), "a check step")
        name = self._str(item, "check")
        spec = self._checker(name, item.get("options"), item.value_loc("check"),
                             item.value_loc("options") if "options" in item else item.loc)
        return CheckStep(spec, item.value_loc("check"))

    def _include_step(self, item: LMap, base: Path | None) -> list[Step]:
        self._check_keys(item, ("include", "select"), "an include step")
        name = self._str(item, "include")
        inc = self.load_file(self._resolve(name, base, item.value_loc("include")),
                             item.value_loc("include"))
        if "select" not in item:
            return list(inc.steps)
        want = self._str(item, "select")
        found = [s for _, s in inc.walk() if isinstance(s, PipelineStep) and s.name == want]
        if not found:
            names = sorted({s.name for _, s in inc.walk() if isinstance(s, PipelineStep)})
            raise self.err(f"pipeline '{inc.name}' has no sub-pipeline '{want}'"
                           f"{_did_you_mean(_near(want, names))}", item.value_loc("select"))
        return [found[0]]

    def _pass(self, name: str, opts: Any, loc: Loc, oloc: Loc) -> PassStep:
        if name not in REGISTRY:
            raise self.err(f"unknown pass '{name}'{_did_you_mean(_near(name, REGISTRY))}", loc,
                           ["`hlorun passes` lists the registered passes"])
        cls = pass_class(name)
        options = self._options(cls, opts, oloc, f"pass '{name}'")
        return PassStep(name, options, loc)

    def _options(self, cls: type, opts: Any, loc: Loc, what: str,
                 skip: tuple[str, ...] = ()) -> dict[str, Any]:
        if opts is None:
            return {}
        if not isinstance(opts, dict):
            raise self.err(f"options of {what} must be a mapping", loc)
        known = option_fields(cls, skip)
        hints = type_hints(cls)
        out = {}
        for k, v in opts.items():
            kloc = opts.loc_of(k) if isinstance(opts, LMap) else loc
            if k not in known:
                listed = ", ".join(known) if known else "none"
                raise self.err(f"{what} has no option '{k}'{_did_you_mean(_near(str(k), known))}",
                               kloc, [f"options: {listed}"])
            vloc = opts.value_loc(k) if isinstance(opts, LMap) else loc
            try:
                out[k] = check_value(v, hints.get(k))
            except (TypeError, ValueError) as e:
                raise self.err(f"option '{k}' of {what}: {e}", vloc) from None
        return out


def option_fields(cls: type, skip: tuple[str, ...] = ()) -> list[str]:
    """Names of the YAML-settable options of a pass or checker class."""
    try:
        fs = fields(cls)
    except TypeError:
        return []
    return [f.name for f in fs if f.name not in ("target",) + skip and f.init]


def _merge(spec: PipelineSpec, inc: PipelineSpec) -> PipelineSpec:
    names = {c.name for c in inc.checkers}
    return PipelineSpec(
        name=spec.name, steps=list(inc.steps) or spec.steps,
        checkers=[c for c in spec.checkers if c.name not in names] + list(inc.checkers),
        target=inc.target, description=spec.description or inc.description,
        sections={k: _deep_merge(spec.sections.get(k), v) for k, v in
                  {**spec.sections, **inc.sections}.items()},
        path=spec.path, includes=spec.includes)


def _deep_merge(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _deep_merge(a.get(k), v)
        return out
    return b if b is not None else a


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
            raise UsageError(f"--passes: unknown pass '{name}'{_did_you_mean(_near(name, REGISTRY))}")
        cls = pass_class(name)
        known = option_fields(cls)
        hints = type_hints(cls)
        checked = {}
        for k, v in opts.items():
            if k not in known:
                raise UsageError(f"--passes: pass '{name}' has no option '{k}'"
                                 f"{_did_you_mean(_near(k, known))} (options: {', '.join(known) or 'none'})")
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
           "PipelineSpec", "PipelineStep", "SECTIONS", "Step", "bundled_dir", "bundled_pipelines",
           "load_pipeline", "option_fields", "parse_pass_list", "parse_pipeline",
           "pipeline_from_passes", "resolve_pipeline"]
