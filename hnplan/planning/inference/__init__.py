"""Inference capacity planner: TTFT, TPOT, throughput and max batch of a serving replica
(:mod:`.core`); replicas, GPUs, power and $ per million tokens for a request rate under SLOs,
prefill/decode disaggregation and short scoring requests (:mod:`.capacity`, its traffic and queueing
formulas in :mod:`.queueing`); validation against
published serving measurements (:mod:`.validation`). See docs/inference.md.
"""

from hnplan.planning.inference.capacity import (  # noqa: F401
    CapacityPlan,
    capacity_verdict,
    gpus_vs_rate,
    kv_transfer_s,
    plan_for_rate,
)
from hnplan.planning.inference.core import (  # noqa: F401
    DEFAULT_MAX_BATCHED_TOKENS,
    MAX_REPLICA_GPUS,
    SERVE_DTYPES,
    Replica,
    Setup,
    candidate_replicas,
    default_kv_dtype,
    fixed_bytes_per_gpu,
    kv_budget_bytes,
    kv_bytes_per_token_per_gpu,
    max_batch,
    memory_per_gpu_bytes,
    resolve,
    tp_allreduce_path,
    usable_bytes_per_gpu,
    weights_bytes_per_gpu,
)
from hnplan.planning.inference.points import (  # noqa: F401
    attributed_power_w,
    best_under_tpot,
    design_frontiers,
    frontier,
    operating_point,
    scoring_capacity,
    serving_power,
    usd_per_gpu_hour,
    usd_per_million_tokens,
)
from hnplan.planning.inference.queueing import Traffic, erlang_c, mgc_wait_s  # noqa: F401
from hnplan.planning.inference.steady import (  # noqa: F401
    KV_RESERVES,
    OperatingPoint,
    batch_grid,
    decode_step,
    graph_batch,
    max_throughput_point,
    prefill_pass,
    prefill_per_request_s,
    queue_run_tokens_per_s,
    reserved_context_tokens,
    steady_state,
)
from hnplan.planning.inference.validation import (  # noqa: F401
    Measurement,
    measurements,
    predict,
    validation_summary,
    validation_table,
)
