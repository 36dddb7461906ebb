"""The autotuning flags of ``compile``: they become
:class:`hlorun.options.Autotuning`, i.e. overrides of the pipeline's
``autotune:`` section (read by the ``autotuner`` pass), so a flag overrides
the YAML and a pass step's own options override both."""

from __future__ import annotations

import click


def autotune_options(fn):
    opts = [
        click.option("--autotune", "autotune_mode", type=click.Choice(["model", "noisy"]), default=None,
                     help="model (default): the deterministic cost model; noisy: each measurement is the "
                          "model plus seeded noise."),
        click.option("--contention", "autotune_contention", default=None, metavar="LEVEL",
                     help="GPU contention for noisy measurements: none, low, medium, high, a sigma, or measured (the run-to-run spread measured on H100/H200 per kernel size class)."),
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
