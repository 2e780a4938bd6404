"""A batch grid timed in one vectorised pass gives the numbers of one pass per batch.

The serving searches (maximum throughput, the frontier, the capacity grid) time a layout's decode steps for
all their batches at once (:func:`hnplan.compute.operator_grid.operator_grid`,
:func:`hnplan.planning.inference.passes.decode_steps`, :func:`hnplan.planning.inference.steady.steady_states`);
each result must be the per-batch path's to 1e-9 (the same arithmetic element by element: in practice equal).
"""

import dataclasses
import math

import numpy as np
import pytest

from hnplan.compute import operator_columns, totals
from hnplan.compute.operator_grid import operator_grid
from hnplan.compute.operators import replace_rows
from hnplan.compute.part_sums import ROUTED_OPS
from hnplan.errors import InputError
from hnplan.planning.inference import Replica, batch_grid, decode_step, max_batch, resolve, steady_state
from hnplan.planning.inference.passes import _decode_work, _kv_bytes_read, _kv_bytes_saved, decode_steps
from hnplan.planning.inference.speculative import routing_peak, verified_tokens
from hnplan.planning.inference.steady import max_throughput_point, steady_states

REL = 1e-9
BATCHES = [1, 2, 3, 7, 64, 129, 1000, 4096]
NUMBERS = ("count", "flops", "bytes", "compute_time_s", "memory_time_s", "time_s")


@pytest.mark.parametrize(
    ("model", "tp", "ep", "dtype", "only"),
    [
        ("deepseek-v3", 1, 8, "bf16", None),
        ("deepseek-v3", 1, 32, "fp8", ROUTED_OPS),
        ("llama3.1-70b", 8, 1, "fp8", None),
        ("qwen3-30b-a3b", 2, 4, "bf16", None),
    ],
)
def test_operator_grid_is_operator_columns_at_each_batch(cat, model, tp, ep, dtype, only):
    m, acc = cat.model(model), cat.accelerator("h100-sxm")
    kw = dict(kv_len=2176, tp=tp, ep=ep, dtype=dtype, only=only)
    grid = operator_grid(m, acc, "decode", BATCHES, 2176, **kw)
    for j, b in enumerate(BATCHES):
        one = operator_columns(m, acc, "decode", b, 2176, **kw)
        assert list(grid["name"]) == list(one["name"]) and list(grid["kind"]) == list(one["kind"])
        for k in NUMBERS:
            np.testing.assert_allclose(grid[k][:, j], np.asarray(one[k], dtype=float), rtol=REL, atol=0)


def test_operator_grid_hand_derived_lm_head_and_errors(cat):
    """Llama 3.1 70B, TP8, bf16 decode: the LM head of ``b`` sequences is ``2 b (vocab / 8) hidden`` FLOPs at
    every batch of the grid (128,256 x 8,192 / 8); a batch below 1 is refused as the table refuses it."""
    m, acc = cat.model("llama3.1-70b"), cat.accelerator("h100-sxm")
    grid = operator_grid(m, acc, "decode", [1, 32, 512], 4096, tp=8)
    head = list(grid["name"]).index("lm_head")
    assert grid["flops"][head].tolist() == [2.0 * b * 128256 / 8 * 8192 for b in (1, 32, 512)]
    with pytest.raises(InputError, match="batch must be >= 1"):
        operator_grid(m, acc, "decode", [4, 0], 4096, tp=8)


def _setups(cat):
    """DeepSeek-V3 as `hnplan infer` picks it on H100 (EP8 PP4, no engine); DeepSeek-V3 EP16 fp8 with two
    overlapped micro-batches, SGLang's one-shot all-to-all and MTP (k = 1); Llama 3.1 70B TP8 fp8 under
    TensorRT-LLM (CUDA-graph padding); Qwen3-30B-A3B EP2 under vLLM."""
    ds = resolve("deepseek-v3", "hgx-h100-ib-ndr", Replica(tp=1, ep=8, pp=4), cat)
    tbo = resolve("deepseek-v3", "hgx-h100-ib-ndr", Replica(tp=1, ep=16, dtype="fp8", overlap=True), cat)
    engine = cat.get("engines", "sglang").model_copy(
        update={
            "weight_dtypes": ["fp8", "bf16"],
            "ep_decode_alltoall": "oneshot",
            "oneshot_alltoall_efficiency": 0.76,
            "speculative_tokens": 1,
            "acceptance_rate": 0.85,
        }
    )
    tbo = dataclasses.replace(tbo, engine=engine)
    llama = resolve("llama3.1-70b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), cat)
    qwen = resolve("qwen3-30b-a3b", "hgx-h100-ib-ndr", Replica(tp=1, ep=2, dtype="fp8", engine="vllm"), cat)
    return {"deepseek-v3 ep8 pp4": ds, "deepseek-v3 tbo mtp": tbo, "llama3.1-70b trtllm": llama, "qwen3 vllm": qwen}


def _close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k, v in a.items():
        if isinstance(v, dict):
            _close(v, b[k])
        elif isinstance(v, float):
            assert b[k] == pytest.approx(v, rel=REL, abs=0), k
        else:
            assert b[k] == v, k


def _work_one_pass_per_batch(s, b, bp, ctx, v):
    """The operator work of one decode step the per-batch way: the table at ``bp v`` tokens, its routed rows
    at the busiest rank's tokens, the attention rows without the KV bytes a narrower cache and the verified
    drafts do not read, then the real sequences' share of the padded attention (the formulas of
    :func:`hnplan.planning.inference.passes.decode_step`, written out on plain columns)."""
    r = s.replica
    kw = dict(kv_len=ctx, tp=r.tp, ep=r.ep, dtype=r.dtype)
    cols = operator_columns(s.model, s.acc, "decode", bp * v, ctx, **kw)
    peak = routing_peak(s, bp * v)
    if peak > 1.0:
        busy = operator_columns(s.model, s.acc, "decode", math.ceil(peak * bp * v), ctx, **kw, only=ROUTED_OPS)
        cols = replace_rows(cols, busy, ROUTED_OPS)
    saved = _kv_bytes_saved(s, bp * v, ctx) + (v - 1) / v * _kv_bytes_read(s, bp * v, ctx)
    att = cols["kind"] == "attention"
    t, comp, mem, byt, fl = (
        np.array(cols[k], dtype=float) for k in ("time_s", "compute_time_s", "memory_time_s", "bytes", "flops")
    )
    fixed = t[att] - np.maximum(comp[att], mem[att])
    share, new_bytes = b / bp, (byt[att] - saved) * (b / bp)
    mem[att], comp[att], fl[att] = mem[att] * new_bytes / byt[att], comp[att] * share, fl[att] * share
    byt[att] = new_bytes
    t[att] = np.maximum(comp[att], mem[att]) + fixed
    tot = totals({**cols, "time_s": t, "compute_time_s": comp, "memory_time_s": mem, "bytes": byt, "flops": fl})
    return {k: tot[k] for k in ("time_s", "bytes", "flops")}


def test_decode_work_of_a_grid_is_one_pass_per_batch(cat):
    pads = [1, 4, 3, 8, 128, 256, 1000, 4096]
    for s in _setups(cat).values():
        v = verified_tokens(s)
        for b, bp, got in zip(BATCHES, pads, _decode_work(s, BATCHES, pads, 2176, v)):
            _close(_work_one_pass_per_batch(s, b, bp, 2176, v), got)


def test_decode_steps_are_decode_step_at_each_batch(cat):
    for name, s in _setups(cat).items():
        pads = [None, 4, None, 8, 128, 256, None, 4096]  # padded (CUDA graphs) or not, one per batch
        many = decode_steps(s, BATCHES, 2176.0, pads)
        for b, p, got in zip(BATCHES, pads, many):
            _close(decode_step(s, b, 2176.0, padded_to=p), got)
        assert len(decode_steps(s, BATCHES, 2176.0)) == len(BATCHES), name


@pytest.mark.parametrize("disaggregated", [False, True])
def test_steady_states_are_steady_state_at_each_batch(cat, disaggregated):
    for s in _setups(cat).values():
        grid = [int(b) for b in batch_grid(max_batch(s, 2048 + 256), s.replica.groups, 16)]
        many = steady_states(s, grid, 2048, 256, disaggregated=disaggregated)
        assert list(many) == grid
        for b in grid:
            _close(steady_state(s, b, 2048, 256, disaggregated=disaggregated).as_dict(), many[b].as_dict())


def test_max_throughput_point_is_the_per_batch_search(cat):
    """The search over the grid and the neighbourhood of its best, one steady state per batch, finds the
    same point with the same numbers."""
    for s in _setups(cat).values():
        mb, g = max_batch(s, 2048 + 256), s.replica.groups
        pts = {int(b): steady_state(s, int(b), 2048, 256) for b in batch_grid(mb, g, 16)}
        keys = sorted(pts)
        i = keys.index(max(pts, key=lambda b: pts[b].tokens_per_s))
        lo, hi = keys[max(i - 1, 0)], keys[min(i + 1, len(keys) - 1)]
        for b in batch_grid(hi, g, 64):
            if lo < b < hi and int(b) not in pts:
                pts[int(b)] = steady_state(s, int(b), 2048, 256)
        best = pts[max(pts, key=lambda b: pts[b].tokens_per_s)]
        _close(best.as_dict(), max_throughput_point(s, 2048, 256).as_dict())
