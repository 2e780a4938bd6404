"""Training planner: the step-time model of a parallel plan, vectorised over candidate plans, and
the search over TP, PP, DP, CP, EP, virtual stages, micro-batch size, ZeRO stage and recomputation.

* :mod:`.plan`: :class:`ParallelPlan`, the divisibility rules (vectorised), :class:`TrainingEstimate`.
* :mod:`.candidates`: the candidate generator (numpy).
* :mod:`.components`: the step-time components over arrays (compute, overlap, bubble, optimizer,
  memory); :mod:`.collectives`: the TP/CP/PP/DP collectives, each timed by :mod:`.collective_time` on its
  placed group; :mod:`.moe`: EP; :mod:`.partial`: recomputation of some layers and activation offloading (stack choices).
* :mod:`.job`: :func:`make_job` (the one place a job is assembled from ids, a software stack and
  explicit overrides, with the provenance of each choice).
* :mod:`.evaluate`: :func:`evaluate_plans` (a DataFrame per
  candidate table) and its one-row case :func:`estimate_plan`.
* :mod:`.search`: the search :func:`rank_plans` / :func:`search_best`; :func:`estimate_training_step`,
  :func:`search_plans` and :func:`best_plan` take ids and build the job once.
* :mod:`.prune`: the compute-only lower bound on step time with which :func:`search_best` evaluates
  fully only the candidates that could win (the same answer as a full ranking).

See docs/training.md.
"""

from hnplan.comm.topology import whole_units  # noqa: F401  (the GPUs a purchase holds, for the command line)
from hnplan.planning.training.candidates import candidate_frame, divisors  # noqa: F401
from hnplan.planning.training.collectives import tp_message_bytes  # noqa: F401
from hnplan.planning.training.components import (  # noqa: F401
    MEGATRON_2021,
    TP_COLLECTIVES_PER_PASS,
    Job,
    StackChoices,
    stack_accelerator,
    stack_choices,
)
from hnplan.planning.training.evaluate import (  # noqa: F401
    BREAKDOWN,
    estimate_from_row,
    estimate_plan,
    evaluate_plans,
    make_job,
    resolve_choices,
)
from hnplan.planning.training.job import fp8_attention_accelerator  # noqa: F401  (validation's kernel rows)
from hnplan.planning.training.plan import (  # noqa: F401
    PLAN_FIELDS,
    TRAIN_DTYPES,
    ParallelPlan,
    TrainingEstimate,
    plan_rules,
    plans_frame,
    valid_mask,
    validate_plan,
)
from hnplan.planning.training.search import (  # noqa: F401
    best_plan,
    candidate_arrays,
    estimate_training_step,
    rank_plans,
    search_best,
    search_candidates,
    search_plans,
    unimplemented_pins,
)
