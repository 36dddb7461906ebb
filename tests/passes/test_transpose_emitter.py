"""Which transposes the shared-memory transpose emitter takes (XLA's
GetDescriptionForTiledTransposeEmitter), on the transposes of the real
dumps: their native kind in XLA's after_optimizations (kInput = tiled,
kLoop = not) where XLA kept the native emitter."""

from __future__ import annotations

import pytest

from hlorun.passes.priority_fusion.transpose_emitter import (normalized_transpose,
                                                            packed_transpose_ok,
                                                            tiled_transpose_description)
from hlorun.text.parser import parse_module


def _transpose(text: str):
    m = parse_module("HloModule t\n\nENTRY %%e (p: %s) -> %s {\n  %%p = %s parameter(0)\n"
                     "  ROOT %%t = %s transpose(%%p), dimensions={%s}\n}\n" % text)
    return m.entry.root


def test_normalization_drops_unit_dims_and_merges_runs():
    assert normalized_transpose([16, 16, 3, 3], [0, 2, 3, 1]) == ([16, 9, 16], [0, 2, 1])
    assert normalized_transpose([1, 3, 32, 32], [0, 2, 3, 1]) == ([1024, 3], [1, 0])
    assert normalized_transpose([4, 128, 4, 64], [0, 2, 1, 3]) == ([4, 4, 128, 64], [0, 2, 1, 3])
    assert normalized_transpose([3, 3, 3, 32], [3, 0, 1, 2]) == ([32, 27], [1, 0])


@pytest.mark.parametrize("shapes,tiled", [
    # convnet_train_bf16: XLA's wrapped_transpose / input_transpose_fusion are kInput
    (("bf16[3,3,3,32]", "bf16[32,3,3,3]", "bf16[3,3,3,32]{3,2,1,0}", "bf16[32,3,3,3]{3,2,1,0}",
      "3,0,1,2"), True),
    # cnn_fp16: the NCHW->NHWC input and the first filter stay kLoop
    (("f16[1,3,32,32]", "f16[1,32,32,3]", "f16[1,3,32,32]{3,2,1,0}", "f16[1,32,32,3]{3,2,1,0}",
      "0,2,3,1"), False),
    (("f16[16,3,3,3]", "f16[16,3,3,3]", "f16[16,3,3,3]{3,2,1,0}", "f16[16,3,3,3]{3,2,1,0}",
      "0,2,3,1"), False),
    # 16 x 9 swapped: below 16, and 144 < 64 x 128
    (("f16[16,16,3,3]", "f16[16,3,3,16]", "f16[16,16,3,3]{3,2,1,0}", "f16[16,3,3,16]{3,2,1,0}",
      "0,2,3,1"), False),
    # transformers: the head transposes keeping the minor 64 are loop transposes,
    # [4,768,128] -> [4,128,768] is XLA's kInput
    (("bf16[4,128,4,64]", "bf16[4,4,128,64]", "bf16[4,128,4,64]{3,2,1,0}",
      "bf16[4,4,128,64]{3,2,1,0}", "0,2,1,3"), False),
    (("bf16[4,768,128]", "bf16[4,128,768]", "bf16[4,768,128]{2,1,0}", "bf16[4,128,768]{2,1,0}",
      "0,2,1"), True),
    # 4-bit elements never take the minor-moving tiled path
    (("s4[64,64]", "s4[64,64]", "s4[64,64]{1,0}", "s4[64,64]{1,0}", "1,0"), False),
])
def test_tiled_transposes_like_xla(shapes, tiled):
    assert (tiled_transpose_description(_transpose(shapes)) is not None) == tiled


def test_packed_transpose_tiles():
    """The packed emitter (bf16: 2 elements per bank, 64x64 tiles) needs 20
    populated rows and columns and even sizes."""
    assert packed_transpose_ok([4, 128, 768], [0, 2, 1], 16)
    assert not packed_transpose_ok([32, 27], [1, 0], 16)      # 27 rows: odd
    assert not packed_transpose_ok([16, 9, 16], [0, 2, 1], 16)  # 9 columns
    assert not packed_transpose_ok([4, 128, 768], [0, 2, 1], 32)  # f32: a bank per element
