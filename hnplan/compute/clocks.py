"""Compute rate at the clock a board's power limit sustains through a training step.

A training step runs its tensor-core kernels back to back for hours at the board power limit, where the
governor lowers the SM clock: on a B200 (1,000 W) back-to-back FlashAttention-4 forward kernels lost 15 % of
their throughput within about 100 ms (1,450 -> 1,237 TFLOP/s, SM clock 1,965 -> about 1,580 MHz;
flashinfer-ai/flashinfer pull request 2899). The HBM clock is not lowered, so only the compute-bound term of
a kernel slows down. Hopper at 700 W loses less: the hot matmul rate of an H100 SXM (794.5 TFLOP/s bf16,
stas00/ml-engineering's mamf-finder.py v2) is 0.959 of the same die's with power to spare (GH200 at 900 W,
828.6 TFLOP/s, which matches the short-run H200 sweep at 1,980 MHz).

An accelerator's ``sustained_compute_fraction`` carries that ratio (absent: 1, no measurement). It is applied
once per kernel family, to calibrations that hold the short-run clock:

- attention: the law's ceilings come from short kernel runs (the H200 sweep over 25 ms loads; the
  FlashAttention-4 paper on Blackwell): the fraction applies;
- GEMMs, Hopper bf16: the law is fitted to the short-run H200 sweep (1,980 MHz): the fraction applies;
- GEMMs, Hopper FP8: bf16 ceiling x the chip's MAMF FP8 / bf16 ratio, two rates of one script at one power
  limit, so the bf16 MAMF's own clock loss divides out and the fraction (which is that loss) puts it back once;
- GEMMs, Blackwell: the chip's MAMF (v2, hot) x the H200's short-run ceiling over the H100's hot MAMF, a
  ratio of two hot MAMF rates: a short-run ceiling to the extent both searches ran at the same fraction of
  their boost clocks (labelled assumption in the catalog; the slowdown is applied once);
- GEMMs whose efficiency a software stack measured in training (``SoftwareStack.matmul_efficiency``) hold
  the sustained clock already: those dtypes keep the measured rate (``held_gemm_dtypes``), while attention
  and the other dtypes still take the fraction.

A die measured at one power limit is carried to another by :func:`power_scaled_fraction` (the cube law of
dynamic power above the idle floor): the 1,400 W GB300 from the 1,100 W B300, the same Blackwell Ultra die, gives
0.914, the prior of the GB300's value, which is now fitted to its published training rows (1.0, at the fit's bound:
``tools/fit_gb300_clock.py``, data/accelerators/gb300.yaml).

The training planner times the kernels of a step on :func:`sustained_accelerator` of the chip, while MFU
keeps the datasheet peak; ``hnplan gemm`` and the inference planner keep the short-run rates.

Assumption (labelled): the fraction measured under continuous tensor-core load holds for every compute-bound
kernel of the step, as if nothing else ran; stretches of memory-bound kernels, communication waits or host
gaps draw less power and let the clock rise, so for steps with many of them (small models, host-bound MoE
layers) the slowdown is an upper side. No published measurement of the clock against a step's kernel mix was
found to make the fraction depend on it; docs/compute.md ("Does the sustained clock follow the step's mix?")
lists what was searched and what the planner's compute-bound shares of the validation rows say
(``tools/clock_mix.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from hnplan.catalog.schemas import Accelerator


def sustained_accelerator(acc: Accelerator, held_gemm_dtypes: Iterable[str] = ()) -> Accelerator:
    """The accelerator at its sustained clock: every dense peak times ``sustained_compute_fraction``.

    Parameters
    ----------
    acc : Accelerator
    held_gemm_dtypes : iterable of str
        GEMM dtypes whose efficiency (``gemm_efficiency`` / ``matmul_efficiency``) was measured in
        training, at the sustained clock already (a software stack's in-training value): their efficiency
        is divided by the fraction, so that GEMMs of these dtypes keep the measured rate
        (efficiency x datasheet peak) while attention and every other compute term slow down.

    Returns
    -------
    Accelerator
        ``acc`` itself when the field is absent or 1; otherwise a copy whose ``dense_tflops`` are scaled
        (HBM bandwidth and fixed costs unchanged; efficiencies unchanged but for ``held_gemm_dtypes``).

    >>> from hnplan.catalog import load_catalog
    >>> cat = load_catalog()
    >>> round(sustained_accelerator(cat.accelerator("b200")).dense_tflops["bf16"], 1)  # 2,250 x 0.853
    1919.2
    >>> h100 = sustained_accelerator(cat.accelerator("h100-sxm"))
    >>> round(h100.dense_tflops["bf16"], 1)  # 989.4 x 0.959
    948.8
    >>> s = sustained_accelerator(cat.accelerator("h100-sxm"), held_gemm_dtypes=["bf16"])
    >>> round(s.dense_tflops["bf16"] * s.gemm_efficiency["bf16"], 1)  # 989.4 x 0.737: the held rate
    729.2
    >>> a100 = cat.accelerator("a100-sxm-80gb")
    >>> sustained_accelerator(a100) is a100  # no sustained measurement: the short-run rates
    True
    """
    f = acc.sustained_compute_fraction
    if f is None or f == 1.0:
        return acc
    update: dict = {"dense_tflops": {k: v * f for k, v in acc.dense_tflops.items()}}
    held = set(held_gemm_dtypes)
    if held:
        update["matmul_efficiency"] = {k: v / f if k in held else v for k, v in acc.matmul_efficiency.items()}
        if acc.gemm_efficiency is not None:
            update["gemm_efficiency"] = {k: v / f if k in held else v for k, v in acc.gemm_efficiency.items()}
    return acc.model_copy(update=update)


def power_scaled_fraction(
    fraction_ref: float, clock_share: float, power_ref_w: float, power_w: float, idle_w: float
) -> float:
    """The sustained compute fraction of a die at another board power limit, from the same die at a known one.

    Dynamic power is ``C V^2 f`` with the voltage following the clock in the DVFS range, so the power above the
    idle floor grows as the cube of the SM clock: at a limit of ``power_w`` the sustained clock is the reference
    one times ``((power_w - idle_w) / (power_ref_w - idle_w))^(1/3)`` (at most the boost clock). Only
    ``clock_share`` of a kernel's throughput follows the clock (the rest is bound by HBM or latency, whose clocks
    the governor does not lower):

    ``clock_ref = 1 - (1 - fraction_ref) / clock_share``,
    ``clock = min(1, clock_ref ((power_w - idle_w) / (power_ref_w - idle_w))^(1/3))``,
    ``fraction = 1 - clock_share (1 - clock)``.

    Parameters
    ----------
    fraction_ref : float
        Sustained fraction of the short-run compute rate at ``power_ref_w`` (dimensionless, in (0, 1]).
    clock_share : float
        Share of the throughput that follows the SM clock, in (0, 1]: 0.750 on a B200, whose back-to-back
        FlashAttention-4 kernels lost 14.7 % of their rate while the clock fell 19.6 % (1,450 -> 1,237 TFLOP/s,
        1,965 -> about 1,580 MHz; flashinfer-ai/flashinfer pull request 2899).
    power_ref_w, power_w : float
        Board power limits (W) of the reference and of the target; both above ``idle_w``.
    idle_w : float
        Idle power of the board (W), the floor below which no clock is bought: 182-197 W on a Blackwell Ultra
        B300 SXM6 AC, whose NVML minimum limit is 200 W (ademeure/QuickRunCUDA b300_clean/16_power_clock.md).

    Returns
    -------
    float
        The sustained fraction at ``power_w``, at most 1.

    Raises
    ------
    ValueError
        When a power limit is not above the idle floor or a fraction or share is outside (0, 1].

    Notes
    -----
    The cube law was checked on one die: a B300 capped at 600 W runs random-data FP8 cuBLAS GEMMs at 3,087
    against 3,983 TFLOP/s at its 1,100 W default, 0.775, where ``((600 - 200) / (1100 - 200))^(1/3)`` = 0.763
    (ademeure/QuickRunCUDA b300_clean/B300_TRUE_REFERENCE.md). Used to carry the B300's fraction to the
    1,400 W GB300, the prior of the value fitted to its rows (``tools/fit_gb300_clock.py``); docs/compute.md,
    "Blackwell Ultra at 1,400 W".

    >>> round(power_scaled_fraction(1237 / 1450, 0.750, 1100.0, 1400.0, 200.0), 3)  # B300 -> GB300
    0.914
    >>> power_scaled_fraction(0.853, 0.750, 1100.0, 1100.0, 200.0)  # the same limit: the same fraction
    0.853
    """
    if not (0.0 < fraction_ref <= 1.0 and 0.0 < clock_share <= 1.0):
        raise ValueError(f"fraction_ref {fraction_ref} and clock_share {clock_share} must lie in (0, 1]")
    if min(power_ref_w, power_w) <= idle_w:
        raise ValueError(f"power limits {power_ref_w} W and {power_w} W must exceed the idle floor {idle_w} W")
    if power_w == power_ref_w:
        return fraction_ref
    clock_ref = 1.0 - (1.0 - fraction_ref) / clock_share
    clock = min(1.0, clock_ref * ((power_w - idle_w) / (power_ref_w - idle_w)) ** (1.0 / 3.0))
    return 1.0 - clock_share * (1.0 - clock)
