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

LAUNCH_MODES = ("eager", "device")
_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxNxK"`` -> ``(m, n, k)`` [elements].

    Raises
    ------
    InputError
        If the text is not three positive integers joined by ``x``.

    >>> parse_shape("4096x7168x2048")
    (4096, 7168, 2048)
    """
    mt = _SHAPE.match(text)
    if not mt or min(int(v) for v in mt.groups()) < 1:
        raise InputError(f"--shape {text!r}: expected MxNxK with three positive integers, e.g. 4096x7168x2048")
    m, n, k = (int(v) for v in mt.groups())
    return m, n, k


def parse_shapes_json(text: str) -> list[tuple[str, int, int, int]]:
    """``'[["bf16", m, n, k], ...]'`` -> list of ``(dtype, m, n, k)``.

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
            raise InputError(
                f"--shapes-json: item {i} is {item!r}; expected a 4-item list (dtype, m, n, k) with positive integer sizes"
            )
        out.append((item[0], item[1], item[2], item[3]))
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
        For an unknown launch mode, no shapes, a dtype the accelerator has no peak for, or an unknown dtype.
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
