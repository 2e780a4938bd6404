"""Cross-field checks of hardware entries that catch a figure written in another unit, each returning the
problem as one line (or None) for a schema validator to raise: the field, the value and the unit it is
read in."""

from __future__ import annotations

#: the range a system file's own ``unit_price_usd`` may span per GPU of its unit [USD]: 200x below and 14x
#: above the catalog's priced systems ($21k-69k a GPU in data/prices.yaml, CloudMatrix 384 to DGX B300; a used
#: data-centre GPU still costs hundreds), so a price typed in thousands ($270 for $270k) or with three zeros too
#: many is refused, not costed
USD_PER_GPU_RANGE = (1e2, 1e6)


def hbm_visible_problem(hbm_visible_gib: float | None, hbm_gb: float) -> str | None:
    """Device memory visible to programs above the package's HBM: a GB figure written where GiB is read.

    Datasheets print binary capacities as GB (the H100's "80 GB" is 80 GiB, 79.11 GiB of it visible:
    ``data/accelerators/h100-sxm.yaml``), so ``hbm_gb`` read as GiB bounds the visible memory under
    either reading.

    >>> hbm_visible_problem(79.11, 80) is None
    True
    >>> hbm_visible_problem(84.94, 80)[:47]
    "field 'hbm_visible_gib': 84.94 GiB is more than"
    """
    if hbm_visible_gib is None or hbm_visible_gib <= hbm_gb:
        return None
    return (
        f"field 'hbm_visible_gib': {hbm_visible_gib:g} GiB is more than the {hbm_gb:g} GB of hbm_gb the package "
        "holds; hbm_visible_gib is GiB (2**30 bytes: nvidia-smi's memory.total in MiB / 1024), not GB"
    )


#: the fewest dense bf16 FLOPs a chip may execute per byte of its memory bandwidth [FLOP/byte]: HBM GPUs run
#: 150-310 (A100 312 TFLOP/s over 2.04 TB/s, H100 989 over 3.35, GB200 2,500 over 8), and the SRAM-only dataflow
#: chips lowest of all, still above 1 (Groq's GroqChip 188 TFLOP/s FP16 over 80 TB/s of on-die SRAM, 2.4;
#: Cerebras WSE-3 125 PFLOP/s over 21 PB/s, 6), so a bandwidth typed in GB/s where TB/s is read (3,350 for
#: the H100's 3.35, 0.3 FLOP/byte) is refused instead of planning every memory-bound kernel 1,000x fast
MIN_FLOP_PER_MEMORY_BYTE = 1.0


def memory_bandwidth_problem(hbm_bw_TBps: float, bf16_tflops: float) -> str | None:
    """A memory bandwidth above the bf16 dense peak in the same thousands (fewer than
    :data:`MIN_FLOP_PER_MEMORY_BYTE` FLOP per byte): a figure in GB/s where TB/s is read.

    >>> memory_bandwidth_problem(3.35, 989.4) is None
    True
    >>> memory_bandwidth_problem(3350, 989.4)[:56]
    "field 'hbm_bw_TBps': 3,350 TB/s is more bytes per second"
    """
    if hbm_bw_TBps * MIN_FLOP_PER_MEMORY_BYTE <= bf16_tflops:
        return None
    return (
        f"field 'hbm_bw_TBps': {hbm_bw_TBps:,.4g} TB/s is more bytes per second than the {bf16_tflops:,.4g} "
        f"TFLOP/s bf16 peak has FLOPs ({bf16_tflops / hbm_bw_TBps:.2g} FLOP per byte; chips run 2-300, SRAM "
        "dataflow chips included); hbm_bw_TBps is terabytes per second (1e12 bytes/s): 3.35 for 3,350 GB/s"
    )


def unit_price_problem(unit_price_usd: float | None, unit_gpus: int) -> str | None:
    """A system's own unit price outside :data:`USD_PER_GPU_RANGE` per GPU of the unit.

    >>> unit_price_problem(270_000, 8) is None
    True
    >>> unit_price_problem(270, 8)
    "field 'unit_price_usd': $270 for a unit of 8 GPUs is $33.75 a GPU, outside $100-1,000,000; it is US dollars per unit (not thousands)"
    """
    if unit_price_usd is None:
        return None
    per_gpu = unit_price_usd / unit_gpus
    lo, hi = USD_PER_GPU_RANGE
    if lo <= per_gpu <= hi:
        return None
    return (
        f"field 'unit_price_usd': ${unit_price_usd:,.0f} for a unit of {unit_gpus} GPUs is ${per_gpu:,.4g} a GPU, "
        f"outside ${lo:,.0f}-{hi:,.0f}; it is US dollars per unit (not thousands)"
    )


#: the IT power a unit may draw per GPU it holds [kW]: the catalog's systems draw 0.8-1.9 kW a GPU with their hosts,
#: NICs and switches (DGX A100 6.5 kW for 8, CloudMatrix 384 559 kW for 384, GB300 NVL72 140 kW for 72); 0.1 leaves
#: room for low-power accelerators and 5 for a generation or two of growth, so a unit's power typed in watts (14,300
#: for 14.3 kW) or a rack's given for a server is refused rather than powered and priced
KW_PER_GPU_RANGE = (0.1, 5.0)


def unit_power_problem(unit_power_kw: float, unit_gpus: int) -> str | None:
    """A unit's IT power outside :data:`KW_PER_GPU_RANGE` per GPU of the unit.

    >>> unit_power_problem(132, 72) is None
    True
    >>> unit_power_problem(1320, 72)
    "field 'unit_power_kw': 1,320 kW for a unit of 72 GPUs is 18.33 kW a GPU, outside 0.1-5 kW; it is the whole unit's IT power in kW (hosts, NICs and switches included)"
    """
    per_gpu = unit_power_kw / unit_gpus
    lo, hi = KW_PER_GPU_RANGE
    if lo <= per_gpu <= hi:
        return None
    return (
        f"field 'unit_power_kw': {unit_power_kw:,.4g} kW for a unit of {unit_gpus} GPUs is {per_gpu:,.4g} kW a GPU, "
        f"outside {lo:g}-{hi:g} kW; it is the whole unit's IT power in kW (hosts, NICs and switches included)"
    )
