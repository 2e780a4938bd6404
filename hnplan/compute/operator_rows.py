"""The raw operator rows of a pass and their times: the engine under :func:`hnplan.compute.operator_table`.

A pass is a list of row tuples ``(name, scope, kind, phase, count, flops, bytes, m, n, k, groups)``:
each forward operator of :mod:`hnplan.compute.layer_ops` expanded into its rows for the phase
(:func:`_rows`: forward, data and weight gradients, recomputation; the fp8 recipe's quantisation rows
after an fp8 GEMM), then timed in one vectorised call (:func:`_times`: the GEMM law of
:mod:`hnplan.compute.gemm`, the attention law of :mod:`hnplan.compute.attention`, and memory-bound
operators at the accelerator's kernel-class bandwidth). The conventions, sharding and sources are those
of :mod:`hnplan.compute.operators`, which builds the table; :mod:`hnplan.compute.parts` sums the same
rows for the training planner. A stack that overlaps TP communication (``tp_comm``) runs the overlapped
GEMMs in chunks (:data:`TP_OVERLAP_CHUNKED`).

References
----------
.. [1] NVIDIA Transformer Engine ``transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp`` at
   d0067d0 (``CommOverlapP2PBase::split_overlap_ag`` and ``split_overlap_rs``: one GEMM per chunk of
   ``m / tp`` rows, two chunks per GEMM with ``aggregate``; ``CommOverlapBase::split_overlap_rs``: ``num_splits``
   chunks; ``CommOverlapBase::bulk_overlap``: one GEMM beside a whole collective); the methods per GEMM in
   NVIDIA's MLPerf Training v5.1 Llama 3.1 8B userbuffers configurations (mlcommons/training_results_v5.1
   ``NVIDIA/benchmarks/llama31_8b/implementations/nemo/conf/tp_overlap/gb200tp2mbs1.yaml``: ring exchange for
   qkv, proj and fc1 forward, proj and fc2 data gradient and fc2 forward, bulk for the qkv and fc1 data and
   weight gradients).
"""

from __future__ import annotations

import functools

import numpy as np

from hnplan import units
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute._op import ACT_BYTES, GRAD_ACCUM_BYTES, _Op
from hnplan.compute.attention import (
    ATTENTION_IMPLS,
    ATTENTION_KINDS,
    attention_kernel_s,
    attention_rows,
    slower_ring_step,
)
from hnplan.compute.counts import (
    RECOMPUTE_MODES,
    achievable_hbm_Bps,
    peak_flops_per_s,
)
from hnplan.compute.fp8_recipes import BF16_GEMMS, StepKernels, fp8_gemm_rows
from hnplan.compute.fp8_recipes import kernel_class as _recipe_class
from hnplan.compute.gemm import gemm_device_time_s, kernel_overhead_s, multi_stream_gemm_time_s
from hnplan.compute.layer_ops import _layer_ops, _once_ops
from hnplan.compute.layout import check_split
from hnplan.compute.tp_overlap import CHUNKED_GEMMS, UB_LAYERS, overlap_chunks
from hnplan.errors import InputError, check_choice

PHASES = ("train", "prefill", "decode")
CONVENTIONS = ("executed", "model")
ATTENTION_DTYPE = "bf16"  # attention core and element-wise operators stay in bf16, also under fp8
GEMM_KINDS = ("gemm", "gemm-bf16")
# Transformer Engine userbuffers overlap (Megatron-Core / NeMo ``tp_comm_overlap``) of the GEMMs whose input
# is all-gathered over TP (column-parallel forward; the row-parallel data gradient) or whose output is
# reduce-scattered (row-parallel forward): each runs as chunks, one GEMM kernel each, as many as the overlap
# method of its userbuffers layer sets (:mod:`hnplan.compute.tp_overlap`: ring exchange ``tp``, or ``tp / 2``
# with ``aggregate``; pipeline ``num_splits``; bulk 1). {GEMM: the row phases that can run chunked}
TP_OVERLAP_CHUNKED = {g: tuple(ph for name, ph in UB_LAYERS if name == g) for g in sorted(CHUNKED_GEMMS)}


def _check(
    model: Model,
    phase: str,
    batch,
    seq_len,
    kv_len,
    tp,
    cp,
    ep,
    dtype,
    recompute,
    convention,
    attention="flash",
    sequence_parallel=True,
    split=True,
):
    """Raise :class:`hnplan.errors.InputError` naming the first choice or degree out of range, or
    :class:`hnplan.errors.PlanRuleError` the first rule of :func:`hnplan.compute.layout.split_rules` the degrees
    break (``split=False``: those rules left to a caller that checked them already)."""
    check_choice("attention", attention, ATTENTION_IMPLS)
    if not isinstance(sequence_parallel, (bool, np.bool_)):
        raise InputError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    check_choice("phase", phase, PHASES)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    check_choice("convention", convention, CONVENTIONS)
    for name, v in (("batch", batch), ("seq_len", seq_len), ("tp", tp), ("cp", cp), ("ep", ep)):
        if v is None or v < 1:
            raise InputError(f"{name} must be >= 1, got {v!r}")
    if kv_len is not None and kv_len < 0:
        raise InputError(f"kv_len must be >= 0, got {kv_len!r}")
    if split:
        check_split(model, tp=tp, ep=ep, training=False)  # PlanRuleError naming the rule
    try:
        units.dtype_bytes(dtype)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _rows(op: _Op, phase: str, recompute: str, convention: str, count: float, ring_once: bool = False):
    """Expand one forward operator into its rows for the phase: (name, scope, kind, phase, count,
    flops, bytes, m, n, k, groups); ``ring_once`` as :func:`hnplan.compute.attention.attention_rows`."""
    executed = convention == "executed"
    out = []
    if op.kind in GEMM_KINDS:
        f = 2.0 * op.groups * op.m * op.n * op.k
        act_in = op.groups * op.m * op.k
        act_out = op.groups * op.m * op.n
        wb = op.in_bytes
        fwd = (f, act_in * wb + op.w_bytes + act_out * ACT_BYTES, op.m, op.n, op.k)
        if phase != "train":
            return [(op.name, op.scope, op.kind, phase, count, *fwd, op.groups)]
        w_elems = op.w_bytes / wb
        out.append((op.name, op.scope, op.kind, "fwd", count, *fwd, op.groups))
        out.append(
            (
                op.name,
                op.scope,
                op.kind,
                "bwd-data",
                count,
                f,
                act_out * wb + op.w_bytes + act_in * ACT_BYTES,
                op.m,
                op.k,
                op.n,
                op.groups,
            )
        )
        out.append(
            (
                op.name,
                op.scope,
                op.kind,
                "bwd-weight",
                count,
                f,
                (act_in + act_out) * wb + 2.0 * w_elems * GRAD_ACCUM_BYTES,
                op.k,
                op.n,
                op.m,
                op.groups,
            )
        )
        if recompute == "full" and op.scope.endswith("layer"):
            out.append((op.name, op.scope, op.kind, "recompute", count, *fwd, op.groups))
        return out
    if op.kind in ATTENTION_KINDS:
        return attention_rows(op, phase, recompute, executed, count * op.share, ring_once)
    f = 0.0 if not executed else op.flops_per_out * op.e_out
    by = op.e_out * op.bytes_per_out if op.bytes_per_out else (op.e_in + op.e_out) * ACT_BYTES
    if op.bwd_only:  # a backward kernel with no forward (autograd's gradient sums): only its backward row
        return [] if phase != "train" else [(op.name, op.scope, op.kind, "bwd", count, f, by, 0.0, 0.0, 0.0, 1.0)]
    if phase != "train":
        return [(op.name, op.scope, op.kind, phase, count, f, by, 0.0, 0.0, 0.0, 1.0)]
    out.append((op.name, op.scope, op.kind, "fwd", count, f, by, 0.0, 0.0, 0.0, 1.0))
    # the backward: a derived chain's own bytes (bwd_bytes_per_out), else twice the forward's (assumption)
    bwd_by = op.e_out * op.bwd_bytes_per_out if op.bwd_bytes_per_out else 2.0 * by
    out.append((op.name, op.scope, op.kind, "bwd", count, 2.0 * f, bwd_by, 0.0, 0.0, 0.0, 1.0))
    if recompute == "full" and op.scope.endswith("layer"):
        out.append((op.name, op.scope, op.kind, "recompute", count, f, by, 0.0, 0.0, 0.0, 1.0))
    return out


def _layer_counts(model: Model, layers: range | None = None) -> dict:
    layers = range(model.layers) if layers is None else layers
    first_dense = model.layers if model.moe is None else model.moe.first_dense_layers
    if isinstance(layers, range) and layers.step == 1:  # the layers below first_dense, counted at once
        dense = max(0, min(layers.stop, first_dense) - layers.start)
    else:
        dense = sum(1 for i in layers if i < first_dense)
    return {"dense-layer": dense, "moe-layer": len(layers) - dense}


def _raw_rows(
    model,
    phase,
    batch,
    seq_len,
    kv_len,
    tp,
    cp,
    ep,
    dtype,
    recompute,
    convention,
    layers=None,
    embedding=True,
    head=True,
    attention="flash",
    sequence_parallel=True,
    acc: Accelerator | None = None,
    stack: StackChoices | None = None,
    occurrence: bool = False,
    only: tuple[str, ...] | None = None,
    core: bool | None = None,
):
    """Raw rows of a pass (``only``: of the layers' operators whose names start with one of these prefixes); with ``acc`` and an fp8 ``dtype`` in training, the quantisation kernels of the
    stack's fp8 recipe follow each fp8 GEMM (:mod:`hnplan.compute.fp8_recipes`). ``batch`` and ``tp`` may
    be integer arrays over micro-batch shapes (:mod:`hnplan.compute.parts`), and with ``occurrence`` ``cp`` too
    (all above 1, or the number 1): the rows' numbers are then arrays over the shapes, element by element those
    of each shape. With ``occurrence``
    the rows of one occurrence of each part (one layer of each kind present, the embedding, the head):
    ``count`` is then the times a row's kernel runs in it (1, or ``cp - 1`` for a ring's off-diagonal step,
    listed once).

    ``core`` (True or False) splits the rows at the attention-core operators (kinds :data:`ATTENTION_KINDS`):
    a list of segments, the rows between two attention cores (even indices: the first segment, before the first
    core) and each core's rows (odd indices), in the order of the whole list; only those of the cores
    (``core=True``) or of the other operators (``False``) are built, the other segments left empty. The other
    operators' rows do not depend on whether a shape's attention runs as a ring (their numbers are those of
    its ``b s / cp`` tokens), so ``cp`` may then mix 1 and above (``core=False``); the segments of two
    calls over the same shapes interleave into the rows of one (:mod:`hnplan.compute.parts`)."""
    wb = units.dtype_bytes(dtype)
    kn = StepKernels.of(stack, dtype)
    expand = _expander(phase, recompute, convention, tp, dtype, sequence_parallel, acc, kn, occurrence)

    rows: list = []
    segments = [rows]
    counts = _layer_counts(model, layers)
    # the sliding-window layers' share of the layers counted (each part's layers, when they differ in kind, at the
    # share of the range: exact for the alternating windows of the catalog's models over an even number of layers)
    sliding = model.sliding_layer_share(range(model.layers) if layers is None else layers)
    for scope, count in counts.items():
        if count:
            count = 1 if occurrence else count
            for op in _layer_ops(
                model,
                scope,
                phase,
                batch,
                seq_len,
                kv_len,
                tp,
                cp,
                ep,
                wb,
                attention,
                sequence_parallel,
                kn,
                sliding_share=sliding,
            ):
                if core is not None and op.kind in ATTENTION_KINDS:  # a segment of its own, between two others
                    rows = []
                    segments += [expand(op, count) if core else [], rows]
                elif only is None or op.name.startswith(only):
                    if not core:
                        rows += expand(op, count)
    if only is not None:
        return rows if core is None else segments
    if not core:
        emb, hd = _once_ops(model, phase, batch, seq_len, tp, cp, wb, sequence_parallel, kn)
        for op in (emb if embedding else []) + (hd if head else []):
            rows += expand(op, 1)
    return rows if core is None else segments


def _expander(phase, recompute, convention, tp, dtype, sequence_parallel, acc, kn: StepKernels, ring_once=False):
    """``expand(op, count)``: the rows of one operator in a pass (:func:`_rows`; ``ring_once`` as
    :func:`hnplan.compute.attention.attention_rows`), followed in fp8 training by the quantisation rows of
    the stack's fp8 recipe for an fp8 GEMM."""
    fp8 = acc is not None and phase == "train" and units.dtype_bytes(dtype) < ACT_BYTES
    sp_tp = tp if (phase == "train" and sequence_parallel) else 1  # tp = 1: no shard
    # userbuffers overlap needs sequence parallelism (Megatron-Core: --tp-comm-overlap with --sequence-parallel)
    chunked = kn.tp_overlap_chunks and phase == "train" and sequence_parallel
    acc_id = None if acc is None else acc.id  # the stack's userbuffers configurations may differ by chip

    def expand(op, count):
        # the ring's off-diagonal steps in the chip's slower shape (cp: a number, or an array over shapes;
        # np.any on a plain number costs more than the row it guards)
        if acc is not None and (op.cp > 1 if isinstance(op.cp, int) else np.any(op.cp > 1)):
            op = slower_ring_step(acc, op)
        out = _rows(op, phase, recompute, convention, count, ring_once)
        if chunked and op.kind == "gemm" and op.name in CHUNKED_GEMMS and op.scope.endswith("layer"):
            out = _chunked(
                out, op, lambda ph: overlap_chunks(kn.tp_overlap_cfg, UB_LAYERS[(op.name, ph)], sp_tp, acc_id)
            )
        if fp8 and op.kind == "gemm" and (op.name not in BF16_GEMMS or (op.name == "lm_head" and kn.fp8_head)):
            out += fp8_gemm_rows(op, acc, kn, recompute, count, sp_tp)
        return out

    return expand


def _chunked(rows: list, op: _Op, chunks_of) -> list:
    """``rows`` of a GEMM with those of the chunkable phases (:data:`TP_OVERLAP_CHUNKED`) split into
    ``chunks_of(phase)`` kernels of ``m / chunks`` rows (a number or an array over shapes, 1: unchanged;
    :func:`hnplan.compute.tp_overlap.overlap_chunks`): each chunk reads the whole weight and its share of
    the activations, the FLOPs split evenly."""
    out = []
    for r in rows:
        if (op.name, r[3]) in UB_LAYERS:
            name, scope, kind, ph, count, flops, nbytes, m, n, k, groups = r
            chunks = chunks_of(ph)
            act = nbytes - op.w_bytes
            r = (
                name,
                scope,
                kind,
                ph,
                count * chunks,
                flops / chunks,
                act / chunks + op.w_bytes,
                m / chunks,
                n,
                k,
                groups,
            )
        out.append(r)
    return out


@functools.lru_cache(maxsize=1024)  # a few dozen distinct (name, kind) pairs, asked for in every pass
def kernel_class(name: str, kind: str) -> str | None:
    """The memory-bound kernel class of an element-wise operator (keys of the accelerator's
    ``memory_kernel_efficiency``), or None for plain copies (embedding lookup, KV-cache write, MoE permute)."""
    if kind != "elementwise":
        return None
    recipe = _recipe_class(name)
    if recipe is not None:
        return recipe
    if name.endswith("_norm"):
        return "norm"
    if name.endswith("_act") or name == "rope":
        return "activation"
    if name.endswith("_residual"):
        return "residual"
    if name == "loss":
        return "cross_entropy"
    return None


def memory_kernel_fractions(acc: Accelerator, names, kinds) -> np.ndarray:
    """Bandwidth fraction of each row's kernel class on ``acc`` (1 for copies and classes not in the catalog)."""
    eff = acc.memory_kernel_efficiency or {}
    per: dict = {}  # a few dozen distinct operators

    def fraction(name, kind) -> float:
        key = (name, kind)
        if key not in per:
            per[key] = eff.get(kernel_class(str(name), str(kind)), 1.0)
        return per[key]

    for key in set(zip(names, kinds)):  # a few dozen distinct operators; then a lookup per row
        fraction(*key)
    return np.fromiter(map(per.__getitem__, zip(names, kinds)), dtype=float, count=len(names))


def _labels(values) -> tuple[np.ndarray, dict]:
    """Integer codes of a column of labels and the code of each label (a few distinct labels)."""
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), index


def _label_is(labels: tuple[np.ndarray, dict], *values: str) -> np.ndarray:
    """Rows whose label (:func:`_labels`) is one of ``values`` [bool array]."""
    codes, index = labels
    present = [index[v] for v in values if v in index]
    if len(present) <= 3:  # a few comparisons over the codes cost a fraction of a gather
        if not present:
            return np.zeros(len(codes), dtype=bool)
        out = codes == present[0]
        for code in present[1:]:
            out |= codes == code
        return out
    wanted = np.zeros(len(index) + 1, dtype=bool)  # a lookup per label code (a few dozen labels)
    wanted[present] = True
    return wanted.take(codes)  # wanted[codes], gathered faster


ROW_FIELDS = ("name", "scope", "kind", "phase", "count", "flops", "bytes", "m", "n", "k", "groups")


def _columns(rows) -> dict:
    """The raw rows as columns: the labels (name, scope, kind, phase) as :func:`_labels`, the rest as
    float arrays."""
    cols = list(zip(*rows)) or [()] * len(ROW_FIELDS)
    out: dict = {f: _labels(cols[i]) for i, f in enumerate(ROW_FIELDS[:4])}
    out.update({f: np.array(cols[i], dtype=float) for i, f in enumerate(ROW_FIELDS) if i >= 4})
    return out


def expert_streams(stack: StackChoices | None) -> int | None:
    """The CUDA streams the stack's routed-expert GEMMs run on, one GEMM per local expert
    (``expert_gemm_launch: per_expert``: ``expert_gemm_streams``), or None for one grouped kernel (a
    ``grouped`` stack, or no stack: the inference engines' fused MoE kernels)."""
    if stack is None or stack.expert_gemm_launch != "per_expert":
        return None
    return stack.expert_gemm_streams


def _times(rows, acc: Accelerator, dtype: str, columns: dict | None = None, streams: int | None = None):
    """Vectorised times of raw rows: (compute_s, memory_s, time_s, gemm_eff) arrays. GEMMs (and the unfused
    attention's batched GEMMs, in bf16) follow the GEMM law of :mod:`hnplan.compute.gemm` on the row's bytes;
    the other operators ``max(compute, memory) + kernel overhead``. ``columns``: :func:`_columns` of the
    rows, when the caller has it; ``streams`` (:func:`expert_streams`): the routed experts' GEMMs run one
    per expert on that many CUDA streams (:func:`hnplan.compute.gemm.multi_stream_gemm_time_s`), None:
    as one grouped kernel."""
    c = _columns(rows) if columns is None else columns
    kind, phase = c["kind"], c["phase"]
    flops, nbytes, m, n, k, g = (c[f] for f in ("flops", "bytes", "m", "n", "k", "groups"))
    is_gemm, is_attn = _label_is(kind, "gemm"), _label_is(kind, "attention")
    is_bmm = _label_is(kind, "attention-gemm", "gemm-bf16")  # bf16 GEMMs of any pass
    eff = np.ones_like(flops)
    rate = np.full_like(flops, peak_flops_per_s(acc, "fp32" if "fp32" in acc.dense_tflops else ATTENTION_DTYPE))
    compute_s = flops / rate
    if is_attn.any():
        # a sliding core over its own queries (n: the window, m: the queries = keys); decode reads the window's cache
        window = _label_is(c["name"], "attention_sliding") & ~_label_is(phase, "decode")
        compute_s[is_attn] = attention_kernel_s(
            acc,
            flops[is_attn],
            m[is_attn],
            n[is_attn],
            k[is_attn],
            g[is_attn],
            _label_is(phase, "bwd")[is_attn],
            window[is_attn],
        )
        eff[is_attn] = flops[is_attn] / compute_s[is_attn] / peak_flops_per_s(acc, ATTENTION_DTYPE)
    memory_s = nbytes / achievable_hbm_Bps(acc)
    if acc.memory_kernel_efficiency:
        names, kinds = ({v: i for i, v in c[f][1].items()} for f in ("name", "kind"))
        nk = len(kinds)
        # each distinct (name, kind) pair once (a few dozen), then one gather over the rows (thousands where the
        # rows hold many shapes, :mod:`hnplan.compute.parts`): a table indexed by the pair's code
        pairs = c["name"][0] * nk + kind[0]
        present = np.zeros(len(names) * nk, dtype=bool)
        present[pairs] = True
        upair = np.flatnonzero(present).tolist()
        lut = np.ones(len(present))
        lut[upair] = memory_kernel_fractions(acc, [names[p // nk] for p in upair], [kinds[p % nk] for p in upair])
        memory_s = memory_s / lut.take(pairs)
    total = np.maximum(compute_s, memory_s) + kernel_overhead_s(acc)
    for sel, dt in ((is_gemm, dtype), (is_bmm, ATTENTION_DTYPE)):
        if sel.any():
            tc, tm_, t = gemm_device_time_s(acc, dt, m[sel], n[sel], k[sel], g[sel], nbytes[sel])
            compute_s[sel], memory_s[sel], total[sel] = tc, tm_, t
            eff[sel] = flops[sel] / tc / peak_flops_per_s(acc, dt)
    if streams is not None:
        sel = is_gemm & _label_is(c["name"], *EXPERT_GEMMS)
        if sel.any():
            total[sel] = multi_stream_gemm_time_s(acc, dtype, m[sel], n[sel], k[sel], g[sel], streams, nbytes[sel])
    return compute_s, memory_s, total, eff


EXPERT_GEMMS = ("expert_up", "expert_down")  # the routed experts' GEMM rows (every pass)
