"""Loading and validating pipeline YAML (the format: hlorun/pipelines/README.md;
the data model: :mod:`hlorun.pipeline.spec`).

Every error is a :class:`~hlorun.pipeline.yaml_source.YamlError` naming the file,
line and column, with the closest known names.  Only PyYAML's SafeLoader
is used (:mod:`hlorun.pipeline.yaml_source`).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..passes import REGISTRY, pass_class
from ..passes.base import Target
from .spec import (DEFAULT_MAX_ITERATIONS, DEFAULT_PIPELINE, SECTIONS, CheckerSpec, CheckStep,
                   PassStep, PipelineSpec, PipelineStep, Step, _plain)
from ..errors import PipelineError, UsageError
from .spec_types import check_value, option_fields, type_hints
from .yaml_source import LMap, Loc, LSeq, YamlError, load_located, loc_of

_TOP_KEYS = ("name", "description", "include", "target", "checkers", "steps")
_PIPELINE_KEYS = ("pipeline", "steps", "fixed_point", "max_iterations", "checkers",
                  "checkers_at_end", "description")
_PASS_KEYS = ("pass", "options", "fixed_point", "max_iterations")


def _near(name: str, choices, n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.5)


def _did_you_mean(near: list[str]) -> str:
    return f"; did you mean {', '.join(near)}?" if near else ""




class Loader:
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

    def load_file(self, path, loc: Loc | None = None) -> PipelineSpec:
        """Load a user's file (a Path) or a bundled pipeline (a Traversable
        from importlib.resources; its includes resolve among the bundled)."""
        if is_bundled(path):
            key, base, filename = ("<bundled>", path.name), bundled_dir(), _bundled_name(path)
        else:
            key, base, filename = path.resolve(), path.parent, str(path)
        if key in self.stack:
            chain = " -> ".join(_key_name(p) for p in self.stack + [key])
            raise self.err(f"include cycle: {chain}", loc)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{filename}: cannot read: {e}") from None
        self.stack.append(key)
        try:
            return self.load_text(text, filename, base)
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
        from ..verifier.checkers import CHECKERS, checker_class
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
        at_end = item.get("checkers_at_end", False)
        if not isinstance(at_end, bool):
            raise self.err("'checkers_at_end' must be true or false",
                           item.value_loc("checkers_at_end"))
        steps = self._steps(item["steps"], item.value_loc("steps"), base, f"'{name}'")
        return PipelineStep(name, steps, item.loc_of("pipeline"), fp, n, checkers, desc, at_end)

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


def _bundled_name(path) -> str:
    """A bundled pipeline's name in messages: its file path where it is a
    real file (checkout, installed wheel), else ``hlorun/pipelines/NAME``."""
    s = str(path)
    return s if os.path.isfile(s) else f"hlorun/pipelines/{path.name}"


def _key_name(key) -> str:
    return key[1] if isinstance(key, tuple) else key.name


# ---------------------------------------------------------------------------
# Finding pipelines
# ---------------------------------------------------------------------------


def bundled_dir():
    """The bundled pipelines: a ``Traversable`` inside the package (a real
    directory in a checkout or an installed wheel, a zip member in a zipped
    one).  Read it through importlib.resources, never as ``str(path)``."""
    from importlib import resources
    return resources.files("hlorun").joinpath("pipelines")


def bundled_pipelines() -> dict:
    """name -> Traversable of every bundled ``*.yaml`` pipeline."""
    d = bundled_dir()
    if not d.is_dir():
        return {}
    files = [f for f in d.iterdir() if f.is_file() and f.name.endswith((".yaml", ".yml"))]
    return {f.name.rsplit(".", 1)[0]: f for f in sorted(files, key=lambda f: f.name)}


def is_bundled(path) -> bool:
    """Whether ``path`` is a bundled pipeline Traversable (not a user Path)."""
    return not isinstance(path, Path)


def resolve_pipeline(name_or_path: str, relative_to=None):
    """A user's YAML file (a Path) or a bundled pipeline (a Traversable).
    ``relative_to`` is the including file's directory (either kind)."""
    p = Path(name_or_path)
    candidates = []
    if relative_to is not None and not p.is_absolute():
        candidates.append(relative_to.joinpath(name_or_path))
    candidates.append(p)
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path or "/" in name_or_path:
        for c in candidates:
            if c.is_file():
                return c
        if relative_to is None or p.is_absolute():
            raise PipelineError(f"pipeline file {name_or_path} does not exist")
    if relative_to is not None:
        for ext in (".yaml", ".yml"):
            c = relative_to.joinpath(name_or_path + ext)
            if c.is_file():
                return c
    bundled = bundled_pipelines()
    if name_or_path in bundled:
        return bundled[name_or_path]
    if p.is_file():
        return p
    near = difflib.get_close_matches(name_or_path, list(bundled), n=3, cutoff=0.5)
    raise PipelineError(f"unknown pipeline '{name_or_path}'"
                        + (f"; did you mean {', '.join(near)}?" if near else "")
                        + f" (bundled: {', '.join(bundled) or 'none'})")


def load_pipeline(name_or_path: str | None = None) -> PipelineSpec:
    """Load a bundled pipeline by name or a YAML file by path (default:
    the bundled GPU/CUDA pipeline)."""
    path = resolve_pipeline(name_or_path or DEFAULT_PIPELINE)
    return Loader().load_file(path)


def parse_pipeline(text: str, filename: str = "<pipeline>") -> PipelineSpec:
    """Load pipeline YAML given as text (``filename`` for messages and
    relative includes)."""
    return Loader().load_text(text, filename, Path(filename).parent if filename else None)


__all__ = ["Loader", "bundled_dir", "bundled_pipelines", "is_bundled", "load_pipeline",
           "parse_pipeline", "resolve_pipeline"]
