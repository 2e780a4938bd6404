"""Defaults that several layers share, each written once.

Imports nothing, so the command line's option defaults read it at no start-up cost.
"""

from __future__ import annotations

#: The software stack a plan is made under when none is given (``data/stacks/megatron-core.yaml``): ``hnplan
#: train``, ``compare``, ``size``, ``memory`` and ``roofline``, a sweep without a ``stack`` axis, a published run
#: without a ``stack`` field, and the design comparison and sizing reports. A planner called with ``stack=None``
#: plans without any stack entry (:class:`hnplan.catalog.schemas.StackChoices`' defaults, the same choices without
#: the stack's measured GEMM efficiencies, e.g. its NVFP4 rates on B200 and GB200).
DEFAULT_STACK = "megatron-core"

#: The GEMM dtypes a training plan runs in (``hnplan train --dtype``): bf16, fp8 (the stack's recipe) and fp4 (NVFP4).
TRAIN_DTYPES = ("bf16", "fp8", "fp4")
