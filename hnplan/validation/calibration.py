"""In-training GEMM efficiency from a published per-layer timing, and that timing as validation rows.

A GEMM micro-benchmark (the accelerator catalog's ``matmul_efficiency``) runs one shape in a loop on
today's libraries; inside a training step the same chip runs its GEMMs between other kernels, under
its power limit, with the libraries of the software stack. Where a paper publishes the time of one
transformer layer measured inside training, the GEMM efficiency that makes hnplan's layer model
reproduce it is a calibration of that (stack, accelerator) pair. It is stored in the software-stack
catalog (``data/stacks/<id>.yaml``, field ``matmul_efficiency``) with this derivation as its source,
and :func:`derive_matmul_efficiency` recomputes it (tests hold the two equal).

The layer model is the one the planner uses: the operator table of :mod:`hnplan.compute` for one
layer and pass, plus the layer's exposed tensor-parallel all-reduces timed by :mod:`hnplan.comm` on
the system (two per forward and two per backward of ``b s h`` 16-bit activations, Narayanan et al.
SC21 Sec. 2.3).

The published timing used for the A100 (Korthikanti et al., "Reducing Activation Recomputation in
Large Transformer Models", arXiv:2205.05198, Table 4: one layer of a 22B GPT, hidden 6,144, 64
heads, sequence 2,048, micro-batch 4, TP 8 on a DGX A100 of Selene; Megatron-LM with unfused
attention):

=====================================  ==============  ===============
row of Table 4                         forward [ms]    backward [ms]
=====================================  ==============  ===============
baseline, no recompute                 7.7             11.9
sequence parallelism                   7.2             11.8
baseline with (full) recompute         7.7             19.5
=====================================  ==============  ===============

The baseline forward (no sequence parallelism, nothing overlapped) calibrates; the other entries are
predictions (:func:`layer_rows`). The paper notes that its backward overlaps the TP all-reduce with
the weight-gradient GEMMs, which the stacks without ``tp_comm`` do not model: hnplan's backward is
an upper bound there.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Model
from hnplan.comm.algorithms import best_time
from hnplan.comm.placement import place_group
from hnplan.compute.gemm import with_matmul_efficiency
from hnplan.compute.operators import operator_table
from hnplan.errors import InputError, check_choice
from hnplan.planning.training import TP_COLLECTIVES_PER_PASS, tp_message_bytes
from hnplan.validation.rows import Row, area

PASSES = ("fwd", "bwd", "bwd+recompute")
KORTHIKANTI_T4 = (
    "Korthikanti et al. 2022, arXiv:2205.05198, Table 4 (22B layer, TP8, micro-batch 4, s 2048, A100 80GB, Selene)"
)
# How Korthikanti et al. ran the 22B model (Table 3, Sec. 6): TP 8, micro-batch 4, sequence 2,048
LAYER_22B = dict(tp=8, microbatch=4, seq_len=2048)
# Table 4 [s]: (pass, sequence parallel) -> measured time of one layer
TABLE4_S = {
    ("fwd", False): 7.7e-3,
    ("bwd", False): 11.9e-3,
    ("fwd", True): 7.2e-3,
    ("bwd", True): 11.8e-3,
    ("bwd+recompute", False): 19.5e-3,
}


def layer_pass_time_s(
    model: Model,
    system,
    microbatch: int,
    seq_len: int,
    tp: int,
    *,
    pass_: str = "fwd",
    dtype: str = "bf16",
    attention: str = "unfused",
    sequence_parallel: bool = False,
    matmul_efficiency: float | None = None,
    catalog: Catalog | None = None,
) -> float:
    """Time of one transformer layer's pass on one GPU with its exposed TP all-reduces [s].

    Parameters
    ----------
    model : str or Model
        A dense model (the layer's shape): id, YAML path or entry.
    system : str or System
        Where the TP group sits (its scale-up domain times the all-reduces).
    microbatch, seq_len, tp : int
        Micro-batch [sequences], sequence [tokens], tensor-parallel degree.
    pass_ : {"fwd", "bwd", "bwd+recompute"}
        The forward; the backward (data and weight gradients); or the backward with the full
        recomputation of the forward in front of it.
    dtype, attention, sequence_parallel
        As :func:`hnplan.compute.operator_table`.
    matmul_efficiency : float, optional
        Large-GEMM efficiency to use for ``dtype`` instead of the accelerator's catalog value [-].

    Returns
    -------
    float
        Compute of the pass's operators plus 2 all-reduces (4 with recomputation) of
        ``microbatch x seq_len x hidden`` 16-bit values over ``tp`` ranks [s].

    Raises
    ------
    InputError
        For an unknown pass, a model with MoE layers, an efficiency outside (0, 1], or as
        :func:`hnplan.compute.operator_table`.
    """
    check_choice("pass", pass_, PASSES)
    cat = catalog or load_catalog()
    model = cat.model(model)
    if model.moe is not None:
        raise InputError(f"layer_pass_time_s times one dense layer; {model.id} has MoE layers")
    if matmul_efficiency is not None and not 0.0 < matmul_efficiency <= 1.0:
        raise InputError(f"matmul_efficiency must be in (0, 1], got {matmul_efficiency!r}")
    sysm = cat.system(system)
    acc = cat.accelerator(sysm.accelerator)
    if matmul_efficiency is not None:
        acc = with_matmul_efficiency(acc, {dtype: matmul_efficiency})
    recompute = "full" if pass_ == "bwd+recompute" else "none"
    df = operator_table(
        model,
        acc,
        "train",
        microbatch,
        seq_len,
        tp=tp,
        dtype=dtype,
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
    )
    df = df[df["scope"] == "dense-layer"]
    phases = {
        "fwd": ("fwd",),
        "bwd": ("bwd", "bwd-data", "bwd-weight"),
        "bwd+recompute": ("bwd", "bwd-data", "bwd-weight", "recompute"),
    }[pass_]
    compute_s = float(df.loc[df["phase"].isin(phases), "time_s"].sum())
    msg = tp_message_bytes(model, microbatch, seq_len)
    ar_s = best_time("allreduce", msg, place_group(cat.design(sysm), tp, 1, job_gpus=tp))[0] if tp > 1 else 0.0
    return compute_s + TP_COLLECTIVES_PER_PASS * (2 if pass_ == "bwd+recompute" else 1) * ar_s


def derive_matmul_efficiency(
    measured_s: float,
    model: Model,
    system,
    microbatch: int,
    seq_len: int,
    tp: int,
    *,
    pass_: str = "fwd",
    dtype: str = "bf16",
    attention: str = "unfused",
    sequence_parallel: bool = False,
    catalog: Catalog | None = None,
) -> float:
    """The large-GEMM efficiency at which :func:`layer_pass_time_s` equals a measured layer time [-].

    Solved with :func:`scipy.optimize.brentq` on (0.05, 1]; tile and wave quantisation still apply
    on top of it (:mod:`hnplan.compute.gemm`), as for the catalog's micro-benchmark value.

    Raises
    ------
    InputError
        If ``measured_s`` is not a positive finite time, or no efficiency in (0.05, 1] reproduces it
        (the rest of the layer alone is slower than the measurement, or the GEMMs at full peak are too
        slow); as :func:`layer_pass_time_s` for the layer's inputs.
    """
    if not (isinstance(measured_s, (int, float)) and math.isfinite(measured_s) and measured_s > 0):
        raise InputError(f"measured_s must be a positive, finite time in seconds, got {measured_s!r}")

    def gap(eff):
        return (
            layer_pass_time_s(
                model,
                system,
                microbatch,
                seq_len,
                tp,
                pass_=pass_,
                dtype=dtype,
                attention=attention,
                sequence_parallel=sequence_parallel,
                matmul_efficiency=eff,
                catalog=catalog,
            )
            - measured_s
        )

    lo, hi = 0.05, 1.0
    if gap(lo) < 0 or gap(hi) > 0:
        raise InputError(
            f"no matmul efficiency in ({lo}, {hi}] reproduces {units.s_to_ms(measured_s):.2f} ms: the layer "
            f"takes {units.s_to_ms(gap(hi) + measured_s):.2f} ms at full peak and "
            f"{units.s_to_ms(gap(lo) + measured_s):.2f} ms at {lo}"
        )
    return float(brentq(gap, lo, hi, xtol=1e-6))


def layer_22b(catalog: Catalog | None = None) -> Model:
    """The 22B GPT of Korthikanti et al. Table 3 (catalog ``megatron-22b``)."""
    return (catalog or load_catalog()).model("megatron-22b")


def a100_megatron_calibration(catalog: Catalog | None = None) -> float:
    """The A100 GEMM efficiency of the Megatron-LM 2021-22 stacks: Korthikanti Table 4's baseline
    forward (7.7 ms, no sequence parallelism) solved with :func:`derive_matmul_efficiency` [-]."""
    cat = catalog or load_catalog()
    L = LAYER_22B
    return derive_matmul_efficiency(
        TABLE4_S[("fwd", False)], layer_22b(cat), "dgx-a100-hdr", L["microbatch"], L["seq_len"], L["tp"], catalog=cat
    )


@area("layer")
def layer_rows(cat) -> list[Row]:
    """Korthikanti Table 4 against the layer model with the ``megatron-lm-2021`` stack's A100 efficiency."""
    eff = cat.stack("megatron-lm-2021").matmul_efficiency["a100-sxm-80gb"]["bf16"]
    m, L = layer_22b(cat), LAYER_22B
    out = []
    for (pass_, sp), measured in TABLE4_S.items():
        t = layer_pass_time_s(
            m,
            "dgx-a100-hdr",
            L["microbatch"],
            L["seq_len"],
            L["tp"],
            pass_=pass_,
            sequence_parallel=sp,
            matmul_efficiency=eff,
            catalog=cat,
        )
        calib = (pass_, sp) == ("fwd", False)
        note = (
            "the A100 efficiency of stack megatron-lm-2021 is solved from this row"
            if calib
            else "the measured backward overlaps the TP all-reduce with weight-gradient GEMMs (paper Sec. 6.2); "
            "hnplan exposes it"
            if pass_ != "fwd"
            else "sequence parallelism: norms and dropouts on 1/t"
        )
        # tolerances: the calibration row only checks the algebra and the rounding of the derived value to
        # the catalog's 0.736; predictions get 12 %: the paper's backward hides up to 2 x 0.86 ms of TP all-reduce behind
        # weight-gradient GEMMs (Sec. 6.2), 7-14 % of the 12-20 ms backwards, which hnplan exposes
        out.append(
            Row(
                "layer",
                f"22B layer {pass_}{', sequence parallel' if sp else ''}, A100 TP8",
                "time per layer",
                "ms",
                units.s_to_ms(measured),
                units.s_to_ms(t),
                "calibration" if calib else "prediction",
                0.02 if calib else 0.12,
                KORTHIKANTI_T4,
                note,
            )
        )
    return out
