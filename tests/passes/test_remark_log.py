"""RemarkLog: remarks packed in chunks read back equal, in order."""

from pathlib import Path

import pytest

from hlorun.passes import remark_log
from hlorun.passes.base import Remark
from hlorun.passes.remark_log import RemarkLog
from hlorun.pipeline.loader import load_pipeline
from hlorun.pipeline.run import RunOptions, run_pipeline
from hlorun.text.parser import load_module

DUMP = next((Path(__file__).parents[2] / "testdata" / "xla-dumps" / "gqa_decode_loop")
            .glob("*before_optimizations*"))


def _remarks(chunk, monkeypatch):
    monkeypatch.setattr(remark_log, "CHUNK", chunk)
    res = run_pipeline(load_module(DUMP), load_pipeline("gpu-cuda"), RunOptions())
    return res, [(e.index, r) for e, r in res.remarks]


def test_packed_remarks_equal_the_unpacked_ones(monkeypatch):
    res, packed = _remarks(7, monkeypatch)
    assert any(type(p) is bytes for e in res.events for _, p in e.remarks._chunks)
    _, plain = _remarks(10 ** 9, monkeypatch)
    assert len(packed) > 100 and packed == plain
    assert [r.to_json() for _, r in packed] == [r.to_json() for _, r in plain]
    ev = max(res.events, key=lambda e: len(e.remarks))
    rs = list(ev.remarks)
    assert [ev.remarks[k] for k in range(len(rs))] == rs and ev.remarks[-1] == rs[-1]
    assert ev.remarks[2:5] == rs[2:5] and ev.remarks == rs


def test_remarks_with_objects_in_their_data_stay_objects(monkeypatch):
    monkeypatch.setattr(remark_log, "CHUNK", 2)
    log = RemarkLog()
    thing = object()
    log.append(Remark("p", "a", "m", data={"x": 1.5, "names": ["b", "c"]}, derived_from=["a"]))
    log.append(Remark("p", "b", "m2", data={"y": None}))
    log.append(Remark("p", "c", "m3", data={"obj": thing}))
    log.append(Remark("p", "d", "m4"))
    log.append(Remark("p", "e", "m5", kind="missed"))
    assert [type(p) for _, p in log._chunks] == [bytes, list]
    rs = list(log)
    assert [r.instruction for r in rs] == ["a", "b", "c", "d", "e"]
    assert rs[0].data == {"x": 1.5, "names": ["b", "c"]} and rs[0].derived_from == ["a"]
    assert rs[2].data["obj"] is thing and rs[4].kind == "missed"
    moved = log.take()
    assert not log and len(moved) == 5 and list(moved) == rs
    with pytest.raises(IndexError):
        moved[5]
