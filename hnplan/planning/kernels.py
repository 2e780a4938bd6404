"""Single kernels on an accelerator as the planners time them: the GEMM law for a list of shapes.

A user holds a kernel they timed against the model (``hnplan gemm``); the planners use the same law inside
every step (:mod:`hnplan.compute.gemm`).
"""

from __future__ import annotations

import json
import re

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.compute.gemm import gemm_roofline
from hnplan.errors import InputError, check_choice
from hnplan.memory.breakdown import hbm_capacity_bytes

LAUNCH_MODES = ("eager", "device")
#: the largest GEMM dimension taken [elements]: cuBLAS passes m, n and k as 32-bit ``int``
#: (``cublasGemmEx``, cuBLAS API reference), so one kernel call is never larger
MAX_GEMM_DIM = 2**31 - 1


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxNxK"`` -> ``(m, n, k)`` [elements]; each dimension a whole count as the other flags take them
    (:func:`hnplan.units.parse_count`: ``4Ki`` is 4,096, ``8k`` 8,000).

    Raises
    ------
    InputError
        If the text is not three positive whole counts joined by ``x``.

    >>> parse_shape("4096x7168x2048"), parse_shape("16Kix8Kix4Ki")
    ((4096, 7168, 2048), (16384, 8192, 4096))
    """
    parts = re.split(r"\s*[xX]\s*", text.strip())
    try:
        if len(parts) != 3:
            raise ValueError(text)
        m, n, k = (int(units.parse_count(p, integer=True)) for p in parts)
    except ValueError:
        m = n = k = 0
    if min(m, n, k) < 1:
        raise InputError(
            f"--shape {text!r}: expected MxNxK with three positive whole numbers, e.g. 4096x7168x2048 or 4Kix7168x2Ki"
        )
    if max(m, n, k) > MAX_GEMM_DIM:
        raise InputError(f"--shape {text!r}: {_too_large(m, n, k)}")
    return m, n, k


def _too_large(m: int, n: int, k: int) -> str:
    dim = max(("M", m), ("N", n), ("K", k), key=lambda d: d[1])
    return f"{dim[0]} = {dim[1]:,} is above {MAX_GEMM_DIM:,} = 2**31 - 1, the largest dimension one GEMM call takes"


def parse_shapes_json(text: str) -> list[tuple[str, int, int, int]]:
    """``'[["bf16", m, n, k], ...]'`` -> list of ``(dtype, m, n, k)``, each dtype lower-cased as ``--dtype`` is.

    Raises
    ------
    InputError
        If the text is not a JSON list of ``[dtype, m, n, k]`` with positive integer sizes.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--shapes-json: not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, list):
        raise InputError("--shapes-json: expected a list of 4-item lists (dtype, m, n, k)")
    out = []
    for i, item in enumerate(data):
        ok = (
            isinstance(item, list)
            and len(item) == 4
            and isinstance(item[0], str)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in item[1:])
        )
        if not ok:
            raise InputError(  # the item as JSON writes it (true, NaN), not as Python does (True, nan)
                f"--shapes-json: item {i} is {json.dumps(item)}; expected a 4-item list (dtype, m, n, k) with positive "
                "integer sizes"
            )
        if max(item[1:]) > MAX_GEMM_DIM:
            raise InputError(f"--shapes-json: item {i}: {_too_large(*item[1:])}")
        dtype = item[0].strip().lower()  # as --dtype reads it: "FP8" is fp8
        if dtype not in units.DTYPE_BYTES:
            raise InputError(
                f"--shapes-json: item {i}: unknown dtype {item[0]!r}; allowed: {', '.join(units.DTYPE_BYTES)}"
            )
        out.append((dtype, item[1], item[2], item[3]))
    return out


def gemm_kernels(
    accelerator: str, shapes: list[tuple[str, int, int, int]], *, launch: str = "eager", catalog: Catalog | None = None
) -> dict:
    """Time, attained TFLOP/s and bound of GEMM shapes on an accelerator under the GEMM law.

    Parameters
    ----------
    accelerator : str
        Catalog id or YAML path.
    shapes : list of (dtype, m, n, k)
        ``C[m, n] = A[m, k] B[k, n]``: tokens, output features, input features [elements].
    launch : {"eager", "device"}
        ``eager``: back-to-back calls from an eager framework (the catalog's host floor applies, as when timing
        ``torch.nn.functional.linear`` in a loop); ``device``: the kernel alone (CUDA graphs; what the planners
        use).

    Returns
    -------
    dict
        ``accelerator``, ``launch`` and ``results``: one dict per shape with ``dtype, m, n, k``, ``flops``
        [FLOP], ``bytes`` [bytes], ``time_s`` [s], ``tflops`` [TFLOP/s], ``bound`` (compute or memory),
        ``compute_time_s`` and ``memory_time_s`` [s].

    Raises
    ------
    InputError
        For an unknown launch mode, no shapes, a dtype the accelerator has no peak for, an unknown dtype, or
        a shape whose operands (A, B and the bf16 C) do not fit in the accelerator's memory
        (:func:`hnplan.memory.breakdown.hbm_capacity_bytes`): no single kernel runs on such a GEMM.
    """
    check_choice("launch", launch, LAUNCH_MODES)
    if not shapes:
        raise InputError("no GEMM shapes: give --shape MxNxK or --shapes-json")
    cat = catalog or load_catalog()
    acc = cat.accelerator(accelerator)
    results = []
    for dtype, m, n, k in shapes:
        try:
            units.dtype_bytes(dtype)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        g = gemm_roofline(acc, dtype, m, n, k, eager=launch == "eager")
        if g["bytes"] > hbm_capacity_bytes(acc):
            raise InputError(
                f"GEMM {m}x{n}x{k} ({dtype}): its operands take {units.to_GB(g['bytes']):,.4g} GB, more than "
                f"the {units.to_GB(hbm_capacity_bytes(acc)):,.4g} GB of one {acc.id}; check --shape / --shapes-json"
            )
        results.append(
            {
                "dtype": dtype,
                "m": m,
                "n": n,
                "k": k,
                "flops": g["flops"],
                "bytes": g["bytes"],
                "time_s": g["time_s"],
                "tflops": g["tflops"],
                "bound": g["bound"],
                "compute_time_s": g["compute_time_s"],
                "memory_time_s": g["memory_time_s"],
            }
        )
    return {"accelerator": acc.id, "launch": launch, "results": results}
