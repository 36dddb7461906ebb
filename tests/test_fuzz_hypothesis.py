"""Grammar-aware generation of *valid* modules with Hypothesis (issue 19).

A strategy builds random, well-typed HLO modules (parameters, constants,
elementwise ops, broadcast, reshape, transpose, convert, slice,
concatenate, reduce with an add computation, dot, tuple and
get-tuple-element, a call of that computation) and checks the two properties:

* printing round-trips: ``print(parse(x)) == x`` for the printed form, and
  the generated text itself parses with a clean verifier;
* every pass in :data:`PASSES`, run alone on a fresh parse, leaves a
  verifier-clean module or raises the project's located ``PassError``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlorun.text.parser import parse_module
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.pipeline.spec import pipeline_from_passes
from hlorun.text.printer import print_module
from hlorun.verifier.checkers import verify

PASSES = ["algsimp", "dce", "cse", "tuple-simplifier", "call-inliner", "reshape-decomposer",
          "dot_decomposer", "transpose-folding", "layout-assignment", "layout_normalization",
          "float-normalization-bf16", "priority-fusion"]
TYPES = ["f32", "bf16", "f16"]
UNARY = ["negate", "abs", "exponential", "tanh", "sqrt", "cosine", "log-plus-one"]
BINARY = ["add", "multiply", "subtract", "maximum", "minimum", "divide"]


def _shape(t, dims):
    return f"{t}[{','.join(map(str, dims))}]"


@st.composite
def modules(draw):
    lines: list[str] = []
    vals: list[tuple[str, str, tuple]] = []   # (name, type, dims)
    n = 0

    def new(t, dims, rhs):
        nonlocal n
        name = f"v{n}"
        n += 1
        lines.append(f"  {name} = {_shape(t, dims)} {rhs}")
        vals.append((name, t, dims))
        return name

    dims_pool = st.one_of(st.tuples(st.integers(1, 4), st.integers(1, 4)),
                          st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple))
    for i in range(draw(st.integers(1, 3))):
        new(draw(st.sampled_from(["f32", "f32"] + TYPES)), draw(dims_pool), f"parameter({i})")
    uses_add = False
    for _ in range(draw(st.integers(1, 12))):
        name, t, dims = draw(st.sampled_from(vals))
        kind = draw(st.sampled_from(["unary", "binary", "broadcast", "reshape", "transpose",
                                     "convert", "slice", "concat", "reduce", "dot", "tuple",
                                     "constant", "call"]))
        if kind == "unary":
            new(t, dims, f"{draw(st.sampled_from(UNARY))}({name})")
        elif kind == "binary":
            same = [v for v in vals if v[1] == t and v[2] == dims]
            other = draw(st.sampled_from(same))[0]
            new(t, dims, f"{draw(st.sampled_from(BINARY))}({name}, {other})")
        elif kind == "broadcast":
            extra = draw(st.integers(1, 3))
            out = dims + (extra,)
            new(t, out, f"broadcast({name}), dimensions={{{','.join(map(str, range(len(dims))))}}}")
        elif kind == "reshape":
            size = 1
            for d in dims:
                size *= d
            out = draw(st.sampled_from([(size,), (1, size), (size, 1)]))
            new(t, out, f"reshape({name})")
        elif kind == "transpose" and len(dims) >= 2:
            perm = draw(st.permutations(list(range(len(dims)))))
            out = tuple(dims[p] for p in perm)
            new(t, out, f"transpose({name}), dimensions={{{','.join(map(str, perm))}}}")
        elif kind == "convert":
            new(draw(st.sampled_from(TYPES)), dims, f"convert({name})")
        elif kind == "slice" and dims:
            lim = [draw(st.integers(1, d)) for d in dims]
            new(t, tuple(lim), "slice(" + name + "), slice={"
                + ", ".join(f"[0:{x}]" for x in lim) + "}")
        elif kind == "concat" and dims:
            new(t, (dims[0] * 2,) + dims[1:], f"concatenate({name}, {name}), dimensions={{0}}")
        elif kind == "reduce" and dims and t == "f32":
            uses_add = True
            d = draw(st.integers(0, len(dims) - 1))
            zero = new("f32", (), "constant(0)")
            out = dims[:d] + dims[d + 1:]
            new("f32", out, f"reduce({name}, {zero}), dimensions={{{d}}}, to_apply=add_f32")
        elif kind == "dot" and len(dims) == 2:
            k = dims[1]
            rhs = [v for v in vals if v[1] == t and len(v[2]) == 2 and v[2][0] == k]
            if rhs:
                r = draw(st.sampled_from(rhs))
            else:  # make one: a broadcast constant [k, j]
                c = new(t, (), "constant(0.5)")
                j = draw(st.integers(1, 4))
                r = (new(t, (k, j), f"broadcast({c}), dimensions={{}}"), t, (k, j))
            new(t, (dims[0], r[2][1]), f"dot({name}, {r[0]}), lhs_contracting_dims={{1}}, "
                "rhs_contracting_dims={0}")
        elif kind == "tuple":
            tup = f"v{n}"
            n += 1
            lines.append(f"  {tup} = ({_shape(t, dims)}) tuple({name})")
            new(t, dims, f"get-tuple-element({tup}), index=0")
        elif kind == "constant":
            new(t, (), "constant(1.5)")
        elif kind == "call" and t == "f32" and not dims:
            uses_add = True
            new("f32", (), f"call({name}, {name}), to_apply=add_f32")
    # the root keeps every value nobody uses alive (no dead code to delete)
    used = {w for ln in lines for w in ln.split("=", 1)[1].replace("(", " ").replace(")", " ")
            .replace(",", " ").split()}
    live = [v for v in vals if v[0] not in used] or vals[-1:]
    lines.append(f"  ROOT out = ({', '.join(_shape(t, d) for _, t, d in live)}) tuple("
                 + ", ".join(v[0] for v in live) + ")")
    body = "\n".join(lines)
    comps = ""
    if uses_add:
        comps = ("add_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                 "  ROOT s = f32[] add(a, b)\n}\n\n")
    return f"HloModule gen\n\n{comps}ENTRY main {{\n{body}\n}}\n"


SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(modules())
def test_generated_modules_round_trip_and_verify(text):
    m = parse_module(text)
    assert verify(m) == [], text
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed
    assert verify(parse_module(printed)) == []


@pytest.mark.parametrize("pass_name", PASSES)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=modules())
def test_every_pass_leaves_a_verifier_clean_module_or_a_located_error(pass_name, text):
    m = parse_module(text)
    spec = pipeline_from_passes(pass_name, checkers=["hlo-verifier"])
    res = run_pipeline(m, spec, RunOptions())
    if res.failure is not None:
        assert res.failure.exception == "PassError", (text, res.failure.traceback)
        return
    assert [v.message for v in res.violations] == [], text
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed
