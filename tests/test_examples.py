"""The bundled example modules: the same text as the checkout's testdata,
usable by name wherever a command takes a module (a file of that name wins),
listed by ``hlorun examples``."""

from __future__ import annotations

from click.testing import CliRunner

from hlorun.cli import cli
from hlorun.examples import EXAMPLES, names, path

from .conftest import REPO

TESTDATA = {"s0": "testdata/s0/jit_dot_general_consumer.hlo", "s2": "testdata/s2/cnn_fp16.hlo",
            "s4": "testdata/s4/gemm_add_bf16.hlo"}


def test_every_example_is_its_testdata_module():
    assert set(names()) == set(TESTDATA)
    for name, rel in TESTDATA.items():
        assert open(path(name), encoding="utf-8").read() == (REPO / rel).read_text(), name
        assert EXAMPLES[name][0] == (REPO / rel).name


def test_compile_by_name_equals_compile_of_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    by_name = CliRunner().invoke(cli, ["compile", "s0", "--no-table", "--diff", "none"])
    by_file = CliRunner().invoke(cli, ["compile", str(REPO / TESTDATA["s0"]), "--no-table",
                                       "--diff", "none"])
    assert by_name.exit_code == 0, by_name.output
    assert by_name.stdout == by_file.stdout and by_name.stdout.startswith("HloModule ")


def test_a_file_of_that_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s0").write_text((REPO / TESTDATA["s4"]).read_text())
    r = CliRunner().invoke(cli, ["compile", "s0", "--no-table", "--diff", "none"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("HloModule jit_f,"), r.stdout[:100]


def test_unknown_name_is_a_located_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["explain", "s9", "--op", "dot.1"])
    assert r.exit_code != 0 and "no such file" in r.output and "s0, s2, s4" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    r = CliRunner().invoke(cli, ["examples", "s9"])
    assert r.exit_code == 1 and "no bundled example 's9'" in r.output


def test_examples_lists_and_prints():
    r = CliRunner().invoke(cli, ["examples"])
    assert r.exit_code == 0 and all(n in r.output for n in names())
    r = CliRunner().invoke(cli, ["examples", "s4", "--path"])
    assert r.exit_code == 0 and r.stdout.strip() == path("s4")
    r = CliRunner().invoke(cli, ["examples", "s4"])
    assert r.stdout == (REPO / TESTDATA["s4"]).read_text()
