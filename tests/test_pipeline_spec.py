"""Pipeline YAML: loading, validation errors (file:line:col + suggestions),
includes, fixed-point groups, options, checkers, sections."""

from __future__ import annotations

import textwrap

import pytest

from hlorun.pipeline.spec import CheckStep, PassStep, PipelineStep, parse_pass_list
from hlorun.pipeline.loader import bundled_pipelines, load_pipeline, parse_pipeline
from hlorun.errors import UsageError
from hlorun.pipeline.yaml_source import YamlError


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def err(tmp_path, text, name="p.yaml") -> YamlError:
    p = write(tmp_path, name, text)
    with pytest.raises(YamlError) as e:
        load_pipeline(str(p))
    return e.value


def test_bundled_pipelines_load_and_name_registered_passes():
    pipes = bundled_pipelines()
    assert "gpu-cuda" in pipes
    for name, path in pipes.items():
        spec = load_pipeline(name)
        assert spec.passes(), name
        assert spec.name == name


def test_default_pipeline_is_gpu_cuda():
    spec = load_pipeline()
    assert spec.name == "gpu-cuda" and spec.target.platform == "cuda"
    assert [c.name for c in spec.checkers] == ["hlo-verifier"]
    simp = [s for _, s in spec.walk() if isinstance(s, PipelineStep) and s.name == "simplification"]
    assert simp and simp[0].fixed_point and simp[0].max_iterations == 25


def test_unknown_pass_names_file_line_and_near_matches(tmp_path):
    e = err(tmp_path, """\
        name: t
        steps:
          - dce
          - tuple-simplifer
        """)
    assert e.loc.line == 4 and e.loc.column == 5
    assert "unknown pass 'tuple-simplifer'" in e.message and "tuple-simplifier" in e.message
    out = e.render()
    assert out.startswith(f"{tmp_path / 'p.yaml'}:4:5: error:")
    assert "  - tuple-simplifer\n    ^" in out


def test_unknown_option_and_bad_type(tmp_path):
    e = err(tmp_path, """\
        name: t
        steps:
          - cse: {is_layout_sensitve: true}
        """)
    assert e.loc.line == 3 and "has no option 'is_layout_sensitve'" in e.message
    assert "is_layout_sensitive" in e.message
    e = err(tmp_path, """\
        name: t
        steps:
          - cse:
              is_layout_sensitive: "yes"
        """)
    assert e.loc.line == 4 and e.loc.column == 28
    assert "expected true or false, got 'yes'" in e.message


def test_nested_fixed_point_and_long_form(tmp_path):
    p = write(tmp_path, "p.yaml", """\
        name: t
        target: {platform: rocm, device: MI300X, compute_capability: gfx942}
        checkers: [hlo-verifier]
        custom_call_targets:
          my_kernel: {in_place: false}
        steps:
          - pipeline: outer
            steps:
              - pipeline: inner
                fixed_point: true
                max_iterations: 3
                steps: [dce]
              - pass: cse
                options: {is_layout_sensitive: true}
                fixed_point: true
              - check: hlo-verifier
          - tuple-simplifier
        """)
    spec = load_pipeline(str(p))
    assert spec.target.platform == "rocm" and spec.target.compute_capability == "gfx942"
    assert spec.section("custom_call_targets") == {"my_kernel": {"in_place": False}}
    outer = spec.steps[0]
    assert isinstance(outer, PipelineStep) and outer.name == "outer"
    inner = outer.steps[0]
    assert inner.fixed_point and inner.max_iterations == 3
    cse = outer.steps[1]
    assert isinstance(cse, PassStep) and cse.fixed_point and cse.options == {"is_layout_sensitive": True}
    assert isinstance(outer.steps[2], CheckStep)
    paths = [(prefix, s.name) for prefix, s in spec.walk()]
    assert ((), "outer") in paths and (("outer", "inner"), "dce") in paths
    assert (("t",), "tuple-simplifier") in paths
    # the YAML we write back loads to the same thing
    again = parse_pipeline(spec.dump_yaml(), str(tmp_path / "again.yaml"))
    assert again.to_yaml() == spec.to_yaml()


def test_include_inherits_and_overrides(tmp_path):
    write(tmp_path, "base.yaml", """\
        name: base
        target: {platform: cuda, device: H100, compute_capability: "9.0"}
        checkers: [hlo-verifier]
        custom_call_targets: {a: {in_place: true}}
        steps:
          - pipeline: simplification
            steps: [dce, cse]
        """)
    p = write(tmp_path, "child.yaml", """\
        name: child
        include: base
        target: {device: H200}
        custom_call_targets: {b: {in_place: false}}
        """)
    spec = load_pipeline(str(p))
    assert spec.name == "child" and spec.target.device == "H200" and spec.target.platform == "cuda"
    assert spec.section("custom_call_targets") == {"a": {"in_place": True}, "b": {"in_place": False}}
    assert [s.name for s in spec.passes()] == ["dce", "cse"]
    p2 = write(tmp_path, "splice.yaml", """\
        name: splice
        steps:
          - include: base.yaml
            select: simplification
          - tuple-simplifier
        """)
    spec2 = load_pipeline(str(p2))
    assert [s.name for s in spec2.steps] == ["simplification", "tuple-simplifier"]


def test_include_errors(tmp_path):
    write(tmp_path, "a.yaml", "name: a\ninclude: b\n")
    write(tmp_path, "b.yaml", "name: b\ninclude: a\n")
    e = err(tmp_path, "name: c\ninclude: a\n", "c.yaml")
    assert "include cycle" in e.message
    e = err(tmp_path, "name: d\nsteps:\n  - include: gpu-cuda\n    select: simplifcation\n", "d.yaml")
    assert "no sub-pipeline 'simplifcation'" in e.message and "simplification" in e.message
    e = err(tmp_path, "name: e\ninclude: gpu-cudda\n", "e.yaml")
    assert e.loc.line == 2 and "gpu-cuda" in e.message


def test_structural_errors(tmp_path):
    e = err(tmp_path, "name: t\nstep: [dce]\n")
    assert "unknown top-level key 'step'" in e.message and "steps" in e.message
    e = err(tmp_path, "name: t\nsteps:\n  - pipeline: x\n    stepz: [dce]\n")
    assert e.loc.line == 4
    e = err(tmp_path, "name: t\nsteps:\n  - dce\n  - dce: 3\n")
    assert "options of pass 'dce' must be a mapping" in e.message
    e = err(tmp_path, "name: t\nname: u\nsteps: [dce]\n")
    assert "duplicate key 'name'" in e.message and e.loc.line == 2
    e = err(tmp_path, "name: t\nsteps: [dce\n")
    assert "invalid YAML" in e.message
    e = err(tmp_path, "name: t\ntarget: {compute_capability: 9.0}\nsteps: [dce]\n")
    assert 'quote it: "9.0"' in e.message
    e = err(tmp_path, "name: t\ncheckers: [hlo-verifer]\nsteps: [dce]\n")
    assert "unknown checker 'hlo-verifer'" in e.message and "hlo-verifier" in e.message
    e = err(tmp_path, "name: t\nsteps:\n  - pass: dce\n    max_iterations: 4\n")
    assert "needs 'fixed_point: true'" in e.message


def test_yaml_cannot_run_code(tmp_path):
    e = err(tmp_path, "name: !!python/object/apply:os.system ['echo hi']\nsteps: [dce]\n")
    assert "is not allowed" in e.message and e.loc.line == 1


def test_pass_list_syntax():
    steps = parse_pass_list("dce,cse{is_layout_sensitive=true},tuple-simplifier{exclude_entry_computation=false}")
    assert [s.name for s in steps] == ["dce", "cse", "tuple-simplifier"]
    assert steps[1].options == {"is_layout_sensitive": True}
    with pytest.raises(UsageError, match="did you mean dce"):
        parse_pass_list("dcee")
    with pytest.raises(UsageError, match="expected true or false"):
        parse_pass_list("cse{is_layout_sensitive=7}")
