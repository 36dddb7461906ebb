"""The pass registry: keys are the classes' XLA names, alphabetical, every
pass has fixtures, and every pass named by a bundled pipeline is
registered (loading validates that)."""

from __future__ import annotations

from hlorun.passes import REGISTRY, pass_class
from hlorun.pipeline.loader import bundled_pipelines, load_pipeline

from ..conftest import TESTDATA


def test_registry_names_match_classes_and_are_sorted():
    for name in REGISTRY:
        assert pass_class(name).name == name
    assert list(REGISTRY) == sorted(REGISTRY), "REGISTRY must stay alphabetical"


def test_every_registered_pass_has_fixtures():
    missing = [n for n in REGISTRY if not list((TESTDATA / "passes" / n).glob("*.hlo"))]
    assert not missing, f"passes without fixtures in testdata/passes/<name>/: {missing}"


def test_every_pipeline_pass_is_registered():
    for name in bundled_pipelines():
        for step in load_pipeline(name).passes():
            assert step.name in REGISTRY
