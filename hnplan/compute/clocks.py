"""Compute rate at the clock a board's power limit sustains through a training step.

The GEMM and attention calibrations of :mod:`hnplan.compute.gemm` and :mod:`hnplan.compute.attention`
were measured in short runs (OpenXLA's matmul table, MAMF searches, kernel papers), at the boost clock a
GPU holds until its power governor acts. A training step runs its tensor-core kernels back to back for
hours at the board power limit, where the governor lowers the SM clock: on a B200 (1,000 W) back-to-back
FlashAttention-4 forward kernels lost 15 % of their throughput within about 100 ms (1,450 -> 1,237 TFLOP/s,
SM clock 1,965 -> about 1,580 MHz; flashinfer-ai/flashinfer pull request 2899). The HBM clock is not
lowered, so only the compute-bound term of a kernel slows down. Hopper at 700 W loses less: the hot matmul
rate of an H100 SXM (794.5 TFLOP/s bf16, measured after a 30 s warm-up of back-to-back matmuls by
stas00/ml-engineering's mamf-finder.py) is 0.959 of the same die's with power to spare (GH200 at 900 W,
828.6 TFLOP/s, which matches the short-run H200 sweep at 1,980 MHz).

An accelerator's ``sustained_compute_fraction`` carries that ratio (absent: 1, no measurement); the
training planner times the kernels of a step on :func:`sustained_accelerator` of the chip, whose dense
peaks are scaled by it, while MFU keeps the datasheet peak. ``hnplan gemm`` and the inference planner keep
the short-run rates.

Assumption (labelled): the fraction measured under continuous tensor-core load holds for every compute-bound
kernel of the step, as if nothing else ran; stretches of memory-bound kernels, communication waits or host
gaps draw less power and let the clock rise, so for steps with many of them (small models, host-bound MoE
layers) the slowdown is an upper side.
"""

from __future__ import annotations

from hnplan.catalog.schemas import Accelerator


def sustained_accelerator(acc: Accelerator) -> Accelerator:
    """The accelerator at its sustained clock: every dense peak times ``sustained_compute_fraction``.

    Parameters
    ----------
    acc : Accelerator

    Returns
    -------
    Accelerator
        ``acc`` itself when the field is absent or 1; otherwise a copy whose ``dense_tflops`` are scaled
        (HBM bandwidth, efficiencies and fixed costs unchanged).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> round(sustained_accelerator(cat.accelerator("b200")).dense_tflops["bf16"], 1)  # 2,250 x 0.853
    1919.2
    >>> round(sustained_accelerator(cat.accelerator("h100-sxm")).dense_tflops["bf16"], 1)  # 989.4 x 0.959
    948.8
    >>> a100 = cat.accelerator("a100-sxm-80gb")
    >>> sustained_accelerator(a100) is a100  # no sustained measurement: the short-run rates
    True
    """
    f = acc.sustained_compute_fraction
    if f is None or f == 1.0:
        return acc
    return acc.model_copy(update={"dense_tflops": {k: v * f for k, v in acc.dense_tflops.items()}})
