"""Make real XLA:GPU dumps of the bench models and record what the GPU
computed (run on a machine with a GPU and jax[cuda]).

    python3 bench/gpu_dumps.py OUT_DIR

For each model of bench/make_models.py: XLA's pass-by-pass dumps
(``--xla_dump_hlo_pass_re=.*``), the inputs (uniform [-1, 1), seed 0, as
``inputs.npz`` with arrays arg0, arg1, ... for ``hlorun run --input``) and
the outputs the GPU produced (``gpu_outputs.npz``: output_0, output_1, ...).
The main module's files and the outputs go to OUT_DIR/<model>.tar.gz.
Inputs are not stored: ``bench_inputs`` in bench/evaluate.py makes the same
ones (uniform [-1, 1) in float64, seed 0, per parameter in order, then cast).
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
from pathlib import Path


def main(out: str) -> int:
    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    import numpy as np
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    names = ["mlp_train_f32", "mlp_train_bf16", "cnn_train_f32"]
    for name in names:
        d = work / name
        d.mkdir(exist_ok=True)
        # one process per model: XLA reads XLA_FLAGS once
        code = f"""
import os, json, sys
os.environ["XLA_FLAGS"] = "--xla_dump_to={d} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=.*"
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import numpy as np, jax, jax.numpy as jnp, ml_dtypes
import make_models as mm
lowered = {{"mlp_train_f32": lambda: mm.mlp_train(jnp.float32), "mlp_train_bf16": lambda: mm.mlp_train(jnp.bfloat16),
           "cnn_train_f32": mm.cnn_train}}[{name!r}]()
compiled = lowered.compile()
flat_in = jax.tree_util.tree_leaves(lowered.args_info)
rng = np.random.default_rng(0)
args = []
for a in flat_in:
    v = rng.uniform(-1.0, 1.0, a.shape).astype(np.float64)
    args.append(np.asarray(v).astype(a.dtype))
treedef = jax.tree_util.tree_structure(lowered.args_info)
params, x, y = jax.tree_util.tree_unflatten(treedef, args)[0]
outs = jax.tree_util.tree_leaves(compiled(params, x, y))
np.savez({str(d / 'gpu_outputs.npz')!r}, **{{f"output_{{i}}": np.asarray(o).astype(np.float32) if o.dtype == jnp.bfloat16 else np.asarray(o) for i, o in enumerate(outs)}})
json.dump({{"device": str(jax.devices()[0]), "jax": jax.__version__}}, open({str(d / 'info.json')!r}, "w"))
print({name!r}, "ok", len(os.listdir({str(d)!r})), "files")
"""
        rc = os.system(f"{sys.executable} -c {json.dumps(code)!r}" if False else f"{sys.executable} - <<'PYEOF'\n{code}\nPYEOF")
        if rc:
            print(name, "failed", rc)
    for name in names:  # one archive per model: the main module's dumps and the outputs
        d = work / name
        with tarfile.open(out_dir / f"{name}.tar.gz", "w:gz") as tar:
            for f in sorted(d.iterdir()):
                if ("jit_step" in f.name and f.suffix == ".txt") or f.suffix in (".npz", ".json"):
                    tar.add(f, arcname=f"{name}/{f.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
