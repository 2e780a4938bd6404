"""A report's parameters checked against the catalog before any notebook runs: ids and the values chosen from
fixed lists (:func:`check_ids`), GPU counts against the designs' fabrics (:func:`check_fabric`) and sequence
lengths against the model's context window (:func:`check_context`). Split from :mod:`hnplan.report_params`
(the notebooks' declared parameters and the checks that need no catalog); :mod:`hnplan.reports` re-exports them."""

from __future__ import annotations

import math

from hnplan import units
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.errors import CatalogError, ScenarioError
from hnplan.report_params import _ID_PARAMS, _SPEC_PARAMS, _SYSTEM_MAPS, _is_number, _literal, notebook_parameters


def check_context(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """``seq_len``, and ``input_tokens + output_tokens``, at most the model's ``max_seq`` (each value given, or
    the notebook's default), as ``hnplan infer`` refuses ``--input-tokens + --output-tokens`` past it: the
    inference_capacity report planned a 2,000,000-token prompt on Llama 3.1 70B (131,072 tokens) and served it
    at a 937 s TTFT.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter(s), the model and its ``max_seq``.
    """
    declared = notebook_parameters(notebook)
    if "model" not in declared or not ({"seq_len", "input_tokens"} & set(declared)):
        return

    def value(key):
        return params[key] if key in params else _literal(declared[key]["default"])

    model = value("model")
    if not isinstance(model, str):
        return
    try:
        m = (catalog or load_catalog()).model(model)
    except CatalogError:  # check_ids names an unknown model
        return
    checks = []
    if "seq_len" in declared:
        checks.append(("'seq_len'", value("seq_len")))
    if "input_tokens" in declared and "output_tokens" in declared:
        checks.append(
            ("'input_tokens' + 'output_tokens'", (value("input_tokens") or 0) + (value("output_tokens") or 0))
        )
    for name, tokens in checks:
        if isinstance(tokens, (int, float)) and tokens > m.max_seq:
            raise ScenarioError(
                f"{where}: notebook {notebook!r}, parameter {name}: {tokens:,.0f} tokens exceed {m.id}'s maximum "
                f"sequence length {m.max_seq:,} (field max_seq)"
            )


_SYSTEM_PARAMS = ("systems", "system", "mix_systems", "supernode", "traditional", "seed_supernode")


def check_fabric(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """Every GPU count given (``gpus``, ``scaling_gpus``, any ``*_gpus``) within one scale-out fabric of each
    design the notebook plans on (:func:`hnplan.planning.design.check_fabric_gpus`: a 3-tier fat-tree), as
    ``hnplan compare``, ``size`` and ``tco`` refuse a ``--gpus`` beyond it: ``gpus: 1e6`` passed the checks
    and ran ``design_comparison`` for over ten minutes of CPU. Counts left at the notebook's defaults are not
    checked.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter, its count, the design and the limit.
    """
    declared = notebook_parameters(notebook)
    counts = [
        (key, g)
        for key, value in params.items()
        if key in declared and (key == "gpus" or key.endswith("_gpus"))
        for g in (value if isinstance(value, list) else [value])
        if _is_number(g) and math.isfinite(g)
    ]
    if not counts:
        return
    systems: list = []
    for key in _SYSTEM_PARAMS:
        if key in declared:
            value = params[key] if params.get(key) is not None else _literal(declared[key]["default"])
            systems += value if isinstance(value, list) else [value]
    from hnplan.errors import InputError
    from hnplan.planning.design import check_fabric_gpus

    cat = catalog or load_catalog()
    for key, g in counts:
        for system in (s for s in systems if isinstance(s, str)):
            try:
                check_fabric_gpus(system, int(g), f"parameter {key!r}:", cat)
            except InputError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, {exc}") from None
    if notebook in _WHOLE_DOMAIN_NOTEBOOKS:
        _check_whole_domains(notebook, counts, systems, where, cat)


#: notebooks that draw one job list for a cluster of ``gpus`` and place it on each design: a count that is not
#: whole scale-up domains capped the largest jobs at a size their TP groups do not divide (``gpus: 100``: "tp = 8
#: must divide the job's 100 GPUs", exit 1), where ``hnplan cluster simulate --gpus`` takes whole domains
_WHOLE_DOMAIN_NOTEBOOKS = ("cluster_operations",)


def _check_whole_domains(notebook: str, counts: list, systems: list, where: str, cat: Catalog) -> None:
    """Each count a whole number of every design's scale-up domain (``scaleup_domain_gpus``); the message names
    the nearest counts that are (multiples of the domains' least common multiple)."""
    domains = {s: cat.system(s).scaleup_domain_gpus for s in systems if isinstance(s, str)}
    if not domains:
        return
    step = math.lcm(*domains.values())
    for key, g in counts:
        bad = [f"{s}'s {d}-GPU domains" for s, d in domains.items() if int(g) % d]
        if bad:
            below, above = int(g) // step * step, -(-int(g) // step) * step
            near = " or ".join(f"{n:,}" for n in (below, above) if n > 0)
            raise ScenarioError(
                f"{where}: notebook {notebook!r}, parameter {key!r}: {int(g):,} GPUs are not whole scale-up "
                f"domains ({', '.join(bad)}); give a multiple of {step:,}, such as {near}"
            )


def _choices(notebook: str, key: str) -> tuple | None:
    """The values a parameter may take where the notebook's planner allows a fixed set (``dtype``, checkpoint
    ``mode``, placement ``policies``), from the planner's own constant; None for any other parameter. Imported
    only when such a parameter is given."""
    if key == "policies":
        from hnplan.cluster.policies import POLICIES

        return POLICIES
    if key == "mode":
        if notebook == "memory":
            from hnplan.planning.memory import MODES

            return MODES
        from hnplan.reliability.checkpoint import CHECKPOINT_MODES

        return CHECKPOINT_MODES
    if key in ("dtype", "system_dtypes"):
        if notebook == "inference_capacity":
            from hnplan.planning.inference.core import SERVE_DTYPES

            return SERVE_DTYPES
        if notebook in ("design_comparison", "training_plan", "roofline"):
            # the catalog's copy (equal to hnplan.planning.training.TRAIN_DTYPES, tests/test_cli_bad_files.py): the
            # planner's import brought the training planner (about 0.05 s of CPU) into every report run, one with
            # nothing to redo too
            from hnplan.catalog.sweeps import TRAIN_DTYPES

            return TRAIN_DTYPES
    return None


def _check_choices_and_maps(notebook: str, params: dict, where: str, cat: Catalog) -> None:
    """A fixed-set parameter one of its values, a cluster ``mix`` a mix the catalog holds, and the keys of
    ``system_dtypes`` / ``system_engines`` system ids with valid values: each failed inside the notebook (a
    ``KeyError`` for ``dtype: fp7`` or ``engine: nope``) or, for a mistyped system key, was ignored unsaid."""
    from hnplan.errors import InputError, check_choice

    def fail(key, msg):
        raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {msg}")

    for key, value in params.items():
        allowed = _choices(notebook, key)
        if value is None:
            continue
        if key == "mix" and isinstance(value, str):
            from hnplan.catalog.mixes import cluster_mix

            try:
                cluster_mix(value, cat)
            except CatalogError as exc:
                fail(key, exc)
        if key == "fixed" and notebook == "design_comparison" and isinstance(value, dict) and value:
            from hnplan.planning.compare import check_pins  # a knob or value the search refuses failed in the notebook

            try:
                check_pins(value)
            except InputError as exc:
                fail(key, exc)
        if key in _SYSTEM_MAPS and isinstance(value, dict):
            for system, v in value.items():
                try:
                    cat.system(system)
                except CatalogError as exc:
                    fail(key, exc)
                if _SYSTEM_MAPS[key] is not None and v is not None:
                    try:
                        cat.get(_SYSTEM_MAPS[key], v)
                    except CatalogError as exc:
                        fail(key, f"{system}: {exc}")
                elif allowed is not None:
                    try:
                        check_choice(f"{system}'s dtype", v, allowed)
                    except InputError as exc:
                        fail(key, exc)
            continue
        if allowed is not None:
            for v in value if isinstance(value, list) else [value]:
                try:
                    check_choice(key, v, allowed)
                except InputError as exc:
                    fail(key, exc)


def check_ids(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """Check that parameters holding catalog ids (``model``, ``systems``, ...) name existing entries, and
    that a sweep spec (``spec``) loads (:func:`hnplan.catalog.sweeps.load_sweep_spec`: its file and fields),
    a cluster ``mix`` exists, fixed-set parameters (``dtype``, ``mode``, ``policies``) hold one of their values
    and ``system_dtypes`` / ``system_engines`` map system ids to valid values.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the parameter and the nearest ids.
    """
    cat = catalog or load_catalog()
    _check_choices_and_maps(notebook, params, where, cat)
    for key, value in params.items():
        if key in _SPEC_PARAMS and isinstance(value, str):
            from hnplan.catalog.sweeps import load_sweep_spec

            try:
                load_sweep_spec(value, cat)
            except CatalogError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {exc}") from None
        kind = _ID_PARAMS.get(key)
        if kind is None:
            continue
        twice = sorted({v for v in value if value.count(v) > 1}) if isinstance(value, list) else []
        if twice:  # two rows of one design: "the slowest, gb200-nvl72, takes 1.00x as long"
            raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: lists {', '.join(twice)} twice")
        for ref in value if isinstance(value, list) else [value]:
            if ref is None:  # an optional reference left to the notebook's default (``stack = None``)
                continue
            try:
                cat.get(kind, ref) if kind != "systems" else cat.system(ref)
            except CatalogError as exc:
                raise ScenarioError(f"{where}: notebook {notebook!r}, parameter {key!r}: {exc}") from None
        seen: dict[str, str] = {}  # a YAML copy that kept a catalog id names its rows as that id: two of one id
        for ref in value if isinstance(value, list) else []:
            entry_id = cat.get(kind, ref).id
            if entry_id in seen:
                raise ScenarioError(
                    f"{where}: notebook {notebook!r}, parameter {key!r}: {seen[entry_id]} and {ref} are both "
                    f"'{entry_id}'; give each its own id"
                )
            seen[entry_id] = ref


#: the jobs one cluster_operations report may simulate in all (jobs drawn x designs x policies): the event
#: simulation takes about 0.55-0.7 ms a job on one core (10,000 jobs on GB200 NVL72 and HGX H100 x topology-aware
#: and best-fit, 1,152 GPUs: 22.2 s of CPU at the mix's load, 27.4 s at load 3, measured 2026-12-02), so 400,000
#: take some 4-5 minutes
MAX_REPORT_CLUSTER_JOBS = 400_000


def check_cluster_jobs(notebook: str, params: dict, where: str, catalog: Catalog | None = None) -> None:
    """The jobs a cluster report simulates at most :data:`MAX_REPORT_CLUSTER_JOBS`: ``n_jobs``, or with
    ``days`` the mix's arrivals over them at the offered load (``load x gpus / E[GPU s a job]`` a second,
    :func:`hnplan.cluster.synthetic.mean_gpu_seconds`), times the designs and the policies. With ``days`` the
    draw grows with load x days: 30 days at load 3 on 1,152 GPUs draw about 228,000 jobs, 911,000 runs.

    Raises
    ------
    ScenarioError
        Naming ``where``, the notebook, the jobs it would simulate and the largest ``days`` (or ``n_jobs``).
    """
    declared = notebook_parameters(notebook)
    if not {"n_jobs", "days", "offered_load", "policies", "systems"} <= set(declared):
        return

    def value(key):
        return params[key] if key in params else _literal(declared[key]["default"])

    systems, policies, days, trace = value("systems"), value("policies"), value("days"), value("trace")
    if trace is not None or not isinstance(systems, list) or not isinstance(policies, list):
        return
    runs = max(len(systems), 1) * max(len(policies), 1)
    if days is None:
        jobs, name, per = value("n_jobs"), "n_jobs", 1.0
    else:
        from hnplan.catalog.mixes import cluster_mix
        from hnplan.cluster.synthetic import mean_gpu_seconds

        gpus, load = value("gpus"), value("offered_load")
        if not _is_number(days) or not _is_number(gpus) or gpus < 1:
            return
        try:
            mix = cluster_mix(value("mix"), catalog or load_catalog())
        except CatalogError:  # check_ids names an unknown mix
            return
        load = mix.offered_load.value if load is None else load
        per = load * gpus / mean_gpu_seconds(mix, int(gpus)) * units.days_to_s(1.0)
        jobs, name = per * days, "days"
    if not _is_number(jobs) or jobs * runs <= MAX_REPORT_CLUSTER_JOBS:
        return
    raise ScenarioError(
        f"{where}: notebook {notebook!r}, parameter {name!r}: {jobs * runs:,.0f} jobs to simulate "
        f"({jobs:,.0f} on each of {runs} design x policy runs), more than {MAX_REPORT_CLUSTER_JOBS:,} (about 0.7 ms "
        f"a job at most, some 5 minutes); {name} at most {MAX_REPORT_CLUSTER_JOBS / runs / per:,.3g} here"
    )
