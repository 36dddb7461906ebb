"""Run an HLO module on XLA's CPU backend through jaxlib (a test oracle).

jaxlib parses the text with XLA's own parser, converts it to StableHLO and
compiles it for the host; only standard opcodes convert (no GPU custom
calls).  ``available()`` is False when jax is not installed.
"""

from __future__ import annotations

import numpy as np


def available() -> bool:
    try:
        import jax  # noqa: F401
        import jaxlib._hlo  # noqa: F401
    except Exception:
        return False
    return True


def run_on_xla_cpu(text: str, args):
    import jax
    import jaxlib._hlo as H
    from jax._src import xla_bridge as xb
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir
    module = H.hlo_module_from_text(text)
    bytecode = xc._xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    with jmlir.make_ir_context():
        asm = str(ir.Module.parse(bytecode))
    backend = xb.get_backend("cpu")
    devices = backend.devices()[:1]
    exe = backend.compile_and_load(asm, xc.DeviceList(tuple(devices)), xc.CompileOptions())
    bufs = [jax.device_put(np.asarray(a), devices[0]) for a in args]
    outs = exe.execute(bufs)
    return [np.asarray(o) for o in outs]
