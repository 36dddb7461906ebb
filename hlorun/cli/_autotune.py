"""The autotuning flags shared by ``compile`` and ``explore``: they become the
pipeline's ``autotune:`` section (read by the ``autotuner`` pass), so a flag
overrides the YAML and a pass step's own options override both."""

from __future__ import annotations

from typing import Any

import click


def autotune_options(fn):
    opts = [
        click.option("--autotune", "autotune_mode", type=click.Choice(["model", "noisy"]), default=None,
                     help="model (default): the deterministic cost model; noisy: each measurement is the "
                          "model plus seeded noise."),
        click.option("--contention", "autotune_contention", default=None, metavar="LEVEL",
                     help="GPU contention for noisy measurements: none, low, medium, high or a sigma."),
        click.option("--sampling", "autotune_sampling", type=click.Choice(["xla", "fair", "each"]), default=None,
                     help="xla: one timed run of Triton's config vs the minimum over every BLAS algorithm "
                          "(S0); fair: the same sample count and the median for every backend; each: every "
                          "candidate timed once."),
        click.option("--flip-seeds", "autotune_flip_seeds", type=click.IntRange(min=0), default=None,
                     help="Seeds over which each decision's flip rate is measured (default 20)."),
        click.option("--autotune-cache", "autotune_cache", default=None, metavar="FILE",
                     help="Load and save autotuning decisions (JSON)."),
        click.option("--autotune-results", "autotune_results", default=None, metavar="FILE",
                     help="Replay XLA's autotune_results.textproto."),
        click.option("--force-backend", "autotune_force", multiple=True, metavar="SPEC",
                     help="triton|cublas|cublaslt|rocblas|hipblaslt|blas (the platform's Lt library) "
                          "for every GEMM, or INSTR=BACKEND[:config] for one (e.g. "
                          "gemm_fusion_dot.7=triton:128x64x32/s3/w4, dot.7=cublaslt:3).  A GEMM the "
                          "backend cannot run is autotuned instead and reported with the reason.  "
                          "Repeatable."),
        click.option("--force-backend-strict", "autotune_force_strict", is_flag=True, default=None,
                     help="Fail when a forced backend cannot run a GEMM (default: autotune that GEMM "
                          "and report why)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def autotune_section(kwargs: dict[str, Any], seed: int | None = None) -> dict[str, Any]:
    """Pop the autotune flags out of a command's kwargs; the overrides for
    the ``autotune:`` section (only flags that were given).  ``seed`` is
    compile's ``--seed`` (shared with --check-numerics): it seeds the noisy
    measurements too."""
    keys = {"autotune_mode": "mode", "autotune_contention": "contention",
            "autotune_sampling": "sampling", "autotune_flip_seeds": "flip_seeds",
            "autotune_cache": "cache", "autotune_results": "xla_results",
            "autotune_force_strict": "force_strict"}
    out: dict[str, Any] = {}
    for k, name in keys.items():
        v = kwargs.pop(k, None)
        if v is not None:
            out[name] = v
    if seed:
        out["seed"] = seed
    forces = kwargs.pop("autotune_force", ()) or ()
    if forces:
        out["force_backend"] = ";".join(forces)
    if out.get("mode") is None and any(k in out for k in ("contention", "sampling")):
        out["mode"] = "noisy"
    return out


def command_flags(section: dict[str, Any]) -> list[str]:
    """The flags that recreate an autotune section (for repro command lines)."""
    names = {"mode": "--autotune", "seed": "--seed", "contention": "--contention",
             "sampling": "--sampling", "flip_seeds": "--flip-seeds", "cache": "--autotune-cache",
             "xla_results": "--autotune-results"}
    out: list[str] = []
    for k, flag in names.items():
        if section.get(k) is not None:
            out += [flag, str(section[k])]
    for f in str(section.get("force_backend") or "").split(";"):
        if f:
            out += ["--force-backend", f]
    if section.get("force_strict"):
        out.append("--force-backend-strict")
    return out
