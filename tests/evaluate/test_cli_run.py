"""``hlorun run`` and ``hlorun compare`` through click's CliRunner."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hlorun.cli import cli, main
from hlorun.evaluate import evaluate, random_inputs
from hlorun.text.parser import load_module

MLP = """HloModule mlp

ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  w = f32[8,3]{1,0} parameter(1)
  d = f32[4,3]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[4,3]{1,0} broadcast(z), dimensions={}
  ROOT r = f32[4,3]{1,0} maximum(d, zb)
}
"""

# The same function with the operands of the dot transposed by mistake.
MLP_WRONG = MLP.replace("x = f32[4,8]{1,0} parameter(0)\n",
                        "x = f32[4,8]{1,0} parameter(0)\n  xt = f32[4,8]{1,0} reverse(x), dimensions={0}\n"
                        ).replace("dot(x, w)", "dot(xt, w)")


@pytest.fixture
def files(tmp_path):
    a = tmp_path / "mlp.hlo"
    a.write_text(MLP)
    b = tmp_path / "mlp_wrong.hlo"
    b.write_text(MLP_WRONG)
    return tmp_path, a, b


def _run(args):
    return CliRunner().invoke(cli, args)


def test_run_prints_a_summary_and_saves_outputs(files):
    tmp, a, _ = files
    out = tmp / "out.npz"
    r = _run(["run", str(a), "--seed", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "f32[4,3]" in r.output and "mean" in r.output
    m = load_module(a)
    want = evaluate(m, random_inputs(m, 3))
    np.testing.assert_array_equal(np.load(out)["output"], want)


def test_run_json_and_inputs_from_files(files):
    tmp, a, _ = files
    x = np.arange(32, dtype=np.float64).reshape(4, 8) / 10  # f64 file -> converted to f32
    np.save(tmp / "x.npy", x)
    w = np.ones((8, 3), np.float32)
    np.save(tmp / "w.npy", w)
    r = _run(["run", str(a), "--input", f"x={tmp / 'x.npy'}", "--input", f"1={tmp / 'w.npy'}",
              "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (row,) = data["outputs"]
    assert row["shape"] == [4, 3] and row["type"] == "f32"
    assert row["values"][:3] == pytest.approx([2.8] * 3)
    assert row["max"] == pytest.approx(x.sum(axis=1).max(), rel=1e-6)


def test_run_save_inputs_round_trips(files):
    tmp, a, _ = files
    r = _run(["run", str(a), "--seed", "5", "--save-inputs", str(tmp / "in.npz"), "-o", str(tmp / "o1.npz")])
    assert r.exit_code == 0, r.output
    r = _run(["run", str(a), "--seed", "99", "--input", str(tmp / "in.npz"), "-o", str(tmp / "o2.npz")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp / "o1.npz")["output"], np.load(tmp / "o2.npz")["output"])


@pytest.mark.parametrize("args,message", [
    (["--input", "nope=x.npy"], "no such parameter"),
    (["--input", "x=missing.npy"], "no such file"),
    (["--max-bytes", "100"], "more than --max-bytes"),
    (["--max-bytes", "lots"], "cannot read 'lots'"),
])
def test_run_errors_are_one_line_messages_exit_1(files, args, message, capsys):
    tmp, a, _ = files
    with pytest.raises(SystemExit) as e:
        main(["run", str(a)] + args)
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_run_rejects_wrong_input_shape(files, capsys):
    tmp, a, _ = files
    np.save(tmp / "bad.npy", np.zeros((3, 3), np.float32))
    with pytest.raises(SystemExit) as e:
        main(["run", str(a), "--input", f"x={tmp / 'bad.npy'}"])
    assert e.value.code == 1
    assert "expected dimensions [4, 8]" in capsys.readouterr().err


def test_unsupported_opcode_is_named_with_its_location(tmp_path, capsys):
    p = tmp_path / "rng.hlo"
    p.write_text("""HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[4]{0} rng(a, b), distribution=rng_uniform
}
""")
    with pytest.raises(SystemExit) as e:
        main(["run", str(p)])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "rng.hlo:5:8: error: opcode 'rng' is not supported by the evaluator" in err
    assert "Traceback" not in err


def test_compare_agrees_and_differs(files):
    _, a, b = files
    r = _run(["compare", str(a), str(a)])
    assert r.exit_code == 0, r.output
    assert "agree" in r.output
    r = _run(["compare", str(a), str(b), "--format", "json"])
    assert r.exit_code == 2
    data = json.loads(r.stdout)
    assert data["ok"] is False
    (leaf,) = data["outputs"]
    assert leaf["mismatches"] > 0 and len(leaf["worst_index"]) == 2


def test_compare_rejects_different_signatures(files, tmp_path, capsys):
    _, a, _ = files
    other = tmp_path / "other.hlo"
    other.write_text(MLP.replace("f32[4,8]", "f32[4,9]").replace("f32[8,3]", "f32[9,3]"))
    with pytest.raises(SystemExit) as e:
        main(["compare", str(a), str(other)])
    assert e.value.code == 1
    assert "parameter 0 differs" in capsys.readouterr().err
