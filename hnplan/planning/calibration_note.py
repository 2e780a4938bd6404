"""The sentence a plan carries when its accelerator lacks calibrations the planners then take at 1.0.

Kept apart from :mod:`hnplan.planning.trust` (which re-exports it) so that a one-shot ``hnplan train`` can say it
without importing the comparison's trust machinery (issue 16's start-up budget, ``tests/test_cli_lazy.py``).
"""

from __future__ import annotations

from hnplan.catalog.loader import Catalog
from hnplan.formatting import styled

#: the accelerator calibrations whose absence the planners read as the ideal 1.0, and what that default means
UNCALIBRATED_DEFAULTS = {
    "sustained_compute_fraction": "compute-bound kernels at the short-run (boost) clock their laws were fitted "
    "at, none of the power-limited clock's slowdown through a training step",
    "memory_kernel_efficiency": "memory-bound kernels (norms, activations, casts and the like) at the full "
    "streaming-copy bandwidth",
}


def uncalibrated_sentence(
    accs: list[str], catalog: Catalog, fields: tuple[str, ...] = tuple(UNCALIBRATED_DEFAULTS), style: str = "markdown"
) -> str:
    """Which accelerators lack calibrations that the planners then take at their ideal default (1.0).

    An absent ``sustained_compute_fraction`` runs compute-bound kernels at the clock of the short GEMM and
    attention runs (:mod:`hnplan.compute.clocks`), an absent ``memory_kernel_efficiency`` runs every
    memory-bound kernel class at the streaming copy's bandwidth (:mod:`hnplan.compute.operator_rows`): both
    are the fastest a chip can be, so a plan on such a chip is likely optimistic beside one on a calibrated
    chip (H800: 0.959 and measured kernel classes, data/accelerators/h800-sxm.yaml).

    Parameters
    ----------
    accs : list of str
        Accelerator ids the plans run on.
    catalog : Catalog
    fields : tuple of str
        The calibrations the caller's planner applies (keys of :data:`UNCALIBRATED_DEFAULTS`); inference, for
        one, has no sustained clock and names ``memory_kernel_efficiency`` only.
    style : str
        ``markdown`` (field names as code spans) or ``plain`` (a JSON field: quoted;
        :func:`hnplan.formatting.styled`).

    Returns
    -------
    str
        Empty when every accelerator carries every field; otherwise one sentence naming, per accelerator, the
        fields it lacks and what their default means.
    """
    missing: dict[tuple[str, ...], list[str]] = {}
    for a in dict.fromkeys(accs):
        acc = catalog.accelerator(a)
        lacks = tuple(f for f in fields if getattr(acc, f) is None)
        if lacks:
            missing.setdefault(lacks, []).append(acc.id)
    if not missing:
        return ""
    said = "; ".join(f"{and_join([f'`{f}`' for f in lacks])} on {and_join(on)}" for lacks, on in missing.items())
    means = "; ".join(f"`{f}` 1.0: {UNCALIBRATED_DEFAULTS[f]}" for f in fields if any(f in k for k in missing))
    return styled(
        f"Not calibrated, modelled at the ideal default 1.0: {said} ({means}); predictions on those chips are "
        "likely optimistic, faster than the chip would run, and not comparable with those on calibrated chips "
        "(`data/accelerators/<id>.yaml` carries the calibrated fields with their sources).",
        style,
    )


def and_join(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: names joined for a sentence (also used by :mod:`hnplan.planning.trust`)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
