"""The compute slowdown beside an overlapped communication kernel that holds some of the SMs.

An NCCL collective launches one CTA per channel (``ncclLaunchKernel`` in NVIDIA/nccl ``src/enqueue.cc``: the
grid is the plan's channel count), and every CTA stays resident for as long as the collective runs. Beside a
GEMM whose CTAs fill an SM's registers and shared memory, each communication CTA takes one SM out of the
compute's use; Transformer Engine's userbuffers overlap reserves ``num_sm`` SMs the same way
(``set_sm_margin``), and DeepEP's kernels hold ``moe_deepep_num_sms``. A compute-bound kernel spread over
the remaining SMs then runs ``sms / (sms - ctas)`` times as long: a slowdown of ``sms / (sms - ctas) - 1``
per second it runs beside the communication (DeepSeek-V3, arXiv:2412.19437 Sec. 3.2.2: 20 of 132 SMs).
HBM and L2 contention between the two are not added.
"""

from __future__ import annotations


def sm_share_slowdown(sms: int, ctas: int) -> float:
    """Fractional slowdown of compute-bound work that shares the GPU with ``ctas`` resident
    communication CTAs, one SM each: ``sms / (sms - ctas) - 1`` [-].

    Parameters
    ----------
    sms : int
        Streaming multiprocessors of the accelerator (catalog ``compute_units``).
    ctas : int
        CTAs (SMs) the communication kernels hold while they run: NCCL's channel count of the
        communicator, Transformer Engine userbuffers' ``num_sm``, DeepEP's SM budget.

    Returns
    -------
    float
        Extra seconds of compute per second of compute run beside the communication.

    Raises
    ------
    ValueError
        If ``ctas`` is negative or leaves no SM to the compute (``ctas >= sms``).

    Examples
    --------
    >>> round(sm_share_slowdown(132, 16), 4)   # Transformer Engine userbuffers' 16 SMs on an H100
    0.1379
    >>> round(sm_share_slowdown(148, 32), 4)   # NCCL_MAX_CTAS=32 channels on a B200
    0.2759
    """
    if ctas < 0 or ctas >= sms:
        raise ValueError(f"communication CTAs {ctas} must be at least 0 and below the {sms} SMs")
    return sms / (sms - ctas) - 1.0


__all__ = ["sm_share_slowdown"]
