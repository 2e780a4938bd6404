"""Roofline planner: one model pass on one accelerator (``hnplan roofline``) or on several
(``notebooks/roofline.ipynb``): operator tables, roofline curves, MFU/HFU and a summary.

It resolves ids through the catalog and calls the compute cost model (:mod:`hnplan.compute`);
the frames carry their units in ``attrs["units"]`` for :func:`hnplan.plots.roofline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Accelerator, Model, StackChoices
from hnplan.compute.counts import peak_flops_per_s
from hnplan.compute.fp8_recipes import check_recipe, mxfp8_gemm_accelerator
from hnplan.compute.operators import (  # OperatorOptions: also the CLI's, which imports no cost model
    OperatorOptions,
    operator_columns,
    operator_options,
    operator_table,
    roofline_curve,
    table_attrs,
    totals,
)
from hnplan.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

INTENSITY_RANGE = (0.1, 1e5)  # FLOP/byte span of the plotted ceilings: covers element-wise to large GEMMs
OP_KEYS = ("name", "phase", "kind", "scope", "count", "flops", "bytes", "intensity", "time_s", "bound")
CURVE_UNITS = {"intensity": "FLOP/byte", "achievable_flops_per_s": "FLOP/s", "peak_flops_per_s": "FLOP/s"}
SUMMARY_UNITS = {
    "flops": "FLOP",
    "bytes": "bytes",
    "time_s": "s",
    "attained_flops_per_s": "FLOP/s",
    "compute_bound_share": "fraction",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction",
}


def utilisation(
    model: Model,
    acc: Accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    time_s: float,
    options: OperatorOptions | None = None,
    **overrides,
) -> dict:
    """MFU and HFU of a pass that takes ``time_s`` on one GPU (PaLM Appendix B conventions).

    Model FLOPs use ``convention="model"`` without recomputation; hardware FLOPs add the recomputation of
    the options' ``recompute``; both over the dense peak of the GEMM dtype. ``options``, ``**overrides``: as
    :func:`hnplan.compute.operator_table` (:class:`hnplan.compute.operators.OperatorOptions`; their
    ``convention`` is not read).

    Returns
    -------
    dict
        ``model_flops``, ``hardware_flops`` [FLOP per GPU per pass], ``mfu``, ``hfu`` [-].

    Raises
    ------
    InputError
        As :func:`hnplan.compute.operator_table`.
    """
    hw = operator_options(options, **overrides, convention="model")
    # the operator table's columns, without the frame (the same rows and totals)
    model_f = totals(operator_columns(model, acc, phase, batch, seq_len, hw, recompute="none"))["flops"]
    hw_f = totals(operator_columns(model, acc, phase, batch, seq_len, hw))["flops"]
    peak = peak_flops_per_s(acc, hw.dtype)
    return {"model_flops": model_f, "hardware_flops": hw_f, "mfu": model_f / time_s / peak, "hfu": hw_f / time_s / peak}


def roofline_comparison(
    model: Model | str,
    accelerators: list[Accelerator | str],
    phase: str,
    batch: int,
    seq_len: int,
    catalog: Catalog | None = None,
    options: OperatorOptions | None = None,
    **overrides,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Operator tables, ceilings and totals of one pass on each accelerator.

    Parameters
    ----------
    model : Model or str
        A model, or its catalog id or YAML path.
    accelerators : list of Accelerator or str
        Accelerators, or their ids or YAML paths.
    phase, batch, seq_len, options, **overrides
        As :func:`hnplan.compute.operator_table` (the options: :class:`hnplan.compute.operators.OperatorOptions`).

    Returns
    -------
    ops : pandas.DataFrame
        The operator tables stacked, with an ``accelerator`` column.
    curves : pandas.DataFrame
        :func:`hnplan.compute.roofline_curve` of each accelerator over :data:`INTENSITY_RANGE`.
        Each of the three frames names its columns' units in ``attrs["units"]``.
    summary : pandas.DataFrame
        One row per accelerator: ``accelerator``, ``phase``, ``flops`` [FLOP], ``bytes`` [bytes],
        ``time_s`` [s], ``attained_flops_per_s`` [FLOP/s], ``compute_bound_share`` (fraction of the
        time in compute-bound operators) [-], ``tokens_per_s`` (tokens processed or generated per
        second, per GPU of the ``tp x cp`` group that shares them) [tokens/s], ``mfu`` (:func:`utilisation`) [-].

    Raises
    ------
    InputError
        As :func:`hnplan.compute.operator_table`; CatalogError for unknown ids.
    """
    import pandas as pd

    cat = catalog or load_catalog()
    model = cat.model(model)
    accs = [cat.accelerator(a) for a in accelerators]
    opts = operator_options(options, **overrides)
    x = np.logspace(np.log10(INTENSITY_RANGE[0]), np.log10(INTENSITY_RANGE[1]), 200)
    tables, curves, rows = [], [], []
    for acc in accs:
        df = operator_table(model, acc, phase, batch, seq_len, opts)
        tables.append(df.assign(accelerator=acc.id))
        curves.append(roofline_curve(acc, opts.dtype, x))
        t = totals(df)
        tokens = (batch if phase == "decode" else batch * seq_len) / (df.attrs["tp"] * df.attrs["cp"])
        rows.append(
            {
                "accelerator": acc.id,
                "phase": phase,
                "flops": t["flops"],
                "bytes": t["bytes"],
                "time_s": t["time_s"],
                "attained_flops_per_s": t["attained_flops_per_s"],
                "compute_bound_share": t["compute_bound_time_s"] / t["time_s"],
                "tokens_per_s": tokens / t["time_s"],
                "mfu": utilisation(model, acc, phase, batch, seq_len, t["time_s"], opts)["mfu"],
            }
        )
    ops, curves_df, summary = (
        pd.concat(tables, ignore_index=True),
        pd.concat(curves, ignore_index=True),
        pd.DataFrame(rows),
    )
    ops.attrs["units"] = dict(tables[0].attrs["units"])
    curves_df.attrs["units"] = dict(CURVE_UNITS)
    summary.attrs["units"] = dict(SUMMARY_UNITS)
    return ops, curves_df, summary


def roofline_answer(
    model,
    accelerator,
    phase: str,
    batch: int,
    seq_len: int,
    options: OperatorOptions | None = None,
    catalog: Catalog | None = None,
    *,
    stack: str | StackChoices | None = None,
    **overrides,
) -> dict:
    """The answer of ``hnplan roofline``: the inputs, totals, MFU/HFU and one dict per operator row.

    Parameters
    ----------
    model, accelerator : str or path
        Catalog ids or YAML paths.
    phase, batch, seq_len, options, **overrides
        As :func:`hnplan.compute.operator_table` (the options: :class:`hnplan.compute.operators.OperatorOptions`).
    stack : str or StackChoices, optional
        A software stack id, whose kernel choices apply, or the choices themselves; default the options'.

    Returns
    -------
    dict
        ``model``, ``accelerator``, ``phase``, ``batch``, ``seq_len``, ``kv_len``, ``tp``, ``cp``, ``ep``,
        ``dtype``, ``recompute``; :func:`hnplan.compute.totals` (``flops`` [FLOP], ``bytes`` [bytes],
        ``time_s`` [s], ...); :func:`utilisation` (``mfu``, ``hfu`` [-]); ``attention``,
        ``sequence_parallel``; ``ops``: one dict of :data:`OP_KEYS` per operator row.

    Raises
    ------
    InputError
        If ``seq_len + kv_len`` exceeds the model's ``max_seq``, and as :func:`hnplan.compute.operator_table`;
        CatalogError for unknown ids.
    """
    cat = catalog or load_catalog()
    m, acc = cat.model(model), cat.accelerator(accelerator)
    opts = operator_options(options, **overrides)
    kv_len = opts.kv_len
    if seq_len + (kv_len or 0) > m.max_seq:
        raise InputError(
            f"--seq-len + --kv-len = {seq_len + (kv_len or 0):,} exceeds {m.id}'s maximum sequence "
            f"length {m.max_seq:,} (field max_seq)"
        )
    if isinstance(stack, str):  # a catalog stack id: its kernel choices (fp8 recipe, eager norms)
        st = cat.stack(stack)
        stack = StackChoices(**{k: getattr(st, k) for k in StackChoices.model_fields})
    if stack is not None:
        opts = operator_options(opts, stack=stack)
    if opts.stack is not None and opts.dtype == "fp8":
        check_recipe(acc, opts.stack.fp8_recipe)  # MXFP8 only on Blackwell
        if opts.stack.fp8_recipe == "mxfp8":  # its GEMMs at the chip's block-scaled rate, as a training job's
            acc = mxfp8_gemm_accelerator(acc)
    if opts.dtype == "fp4" and phase == "train":
        check_recipe(acc, "nvfp4")  # NVFP4 training needs an fp4 peak
    # the operator table's columns and inputs, without the frame: no pandas on the command's path
    cols = operator_columns(m, acc, phase, batch, seq_len, opts)
    attrs = table_attrs(m, acc, phase, batch, seq_len, opts)
    keys = ("model", "accelerator", "phase", "batch", "seq_len", "kv_len", "tp", "cp", "ep", "dtype", "recompute")
    out = {k: attrs[k] for k in keys}
    out.update(totals(cols))
    out.update(utilisation(m, acc, phase, batch, seq_len, out["time_s"], opts))
    out.update(attention=attrs["attention"], sequence_parallel=attrs["sequence_parallel"])
    values = [cols[k].tolist() for k in OP_KEYS]  # numpy scalars as Python's, as DataFrame.to_dict gives them
    out["ops"] = [dict(zip(OP_KEYS, row, strict=True)) for row in zip(*values, strict=True)]
    return out


def roofline_verdict(summary: pd.DataFrame) -> str:
    """A short Markdown reading of :func:`roofline_comparison` summaries (one or more phases)."""
    lines = []
    for phase, g in summary.groupby("phase", sort=False):
        best = g.loc[g["time_s"].idxmin()]
        worst = g.loc[g["time_s"].idxmax()]
        share = g["compute_bound_share"].mean()
        kind = "compute-bound" if share >= 0.5 else "memory-bound"
        lines.append(
            f"- **{phase}**: fastest on **{best['accelerator']}** ({best['time_s'] / units.MILLI:,.2f} ms per pass, "
            f"{best['tokens_per_s']:,.0f} tokens/s per GPU), {worst['time_s'] / best['time_s']:.2f}x "
            f"faster than {worst['accelerator']}; {share:.0%} of the time is in compute-bound operators, "
            f"so this phase is {kind} and scales with "
            f"{'peak FLOP/s' if kind == 'compute-bound' else 'HBM bandwidth'}."
        )
    return "\n".join(lines)
