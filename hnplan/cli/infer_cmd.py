"""``hnplan infer``: latency, throughput, max batch, replicas, GPUs and $ per million tokens of serving."""

from __future__ import annotations

import math
import numbers

import typer

from hnplan import units
from hnplan.cli._app import (
    app,
    console,
    count,
    current_context,
    handle_errors,
    kv_table,
    print_json,
    whole_units_text,
)
from hnplan.cli._options import check_expert_flags, dtype_name
from hnplan.cli._usage import typed_flag
from hnplan.errors import InfeasiblePlan, InputError
from hnplan.labels import column_header

# rows whose generic header would mislead here: the plan's utilisation is the share of batch slots busy,
# the GPU's is the busy share its power is drawn at (hnplan.planning.inference.serving_power); the IT
# and facility power of the GPUs' whole units are rated (attributed_power_w), the GPU, node and replica
# power (and the replica's facility power) are drawn at that utilisation; the HBM is what the engine
# may use (gpu_memory_utilization of the visible HBM), not the accelerator's capacity
_HEADER = {
    "utilisation": "batch slots busy [-]",
    "gpu_utilisation": "GPU utilisation for power [-]",
    "it_power_kw": "IT power, rated [kW]",
    "facility_power_kw": "facility power, rated [kW]",
    "gpu_power_w": "GPU power at load [W]",
    "node_power_w": "node power at load [W]",
    "replica_power_w": "replica IT power at load [W]",
    "facility_power_w": "replica facility power at load [W]",
    "hbm_gib": "HBM the engine may use [GiB]",
    # serving counts output tokens (docs/inference.md: $ per million output tokens), training every token
    "tokens_per_s": "output throughput [tokens/s]",
    "tokens_per_s_per_gpu": "output throughput per GPU [tokens/s]",
    "tokens_per_s_per_user": "output throughput per user [tokens/s]",
    "usd_per_million_tokens": "$ per million output tokens",
    "joules_per_token": "energy per output token [J]",
    "compute_busy": "compute busy [-]",
    "memory_busy": "memory busy [-]",
    "requests_per_s_per_gpu": "request rate per GPU [requests/s]",
}


#: what the planner assumes without --engine (docs/inference.md, Serving engines)
NO_ENGINE = "memory alone caps the batch, no host time per step, whole-prompt prefill"


def _seconds_hint(ttft_slo_ms: float, tpot_slo_ms: float) -> str:
    """For SLOs that nothing meets, a hint when one is under 1 ms, as seconds typed for milliseconds would be
    (no LLM decodes a token in under a millisecond: a weights pass reads gigabytes of HBM at a few TB/s).

    >>> _seconds_hint(0.5, 0.05)
    '; --ttft-slo-ms 0.5, --tpot-slo-ms 0.05 are milliseconds (seconds typed? 0.5 s is 500)'
    >>> _seconds_hint(1000, 50)
    ''
    """
    small = [(flag, v) for flag, v in (("--ttft-slo-ms", ttft_slo_ms), ("--tpot-slo-ms", tpot_slo_ms)) if v < 1]
    if not small:
        return ""
    given = ", ".join(f"{flag} {v:g}" for flag, v in small)
    return f"; {given} {'are' if len(small) > 1 else 'is'} milliseconds (seconds typed? {small[0][1]:g} s is {units.s_to_ms(small[0][1]):g})"


#: latencies the table prints in ms, as the SLOs are given (--ttft-slo-ms, --tpot-slo-ms); JSON keeps seconds
_MS_KEYS = frozenset(
    {"ttft_s", "ttft_mean_s", "tpot_s", "kv_transfer_s", "latency_s", "pass_s"}
)  # e2e latency stays in s


def _row(head: str, key: str, v) -> tuple[str, str]:
    """A table row: the header and the value, a latency of :data:`_MS_KEYS` in ms (``TPOT [ms]`` 39.65 beside
    ``--tpot-slo-ms 50``, not ``TPOT [s]`` 0.03965).

    >>> _row("TPOT [s]", "tpot_s", 0.03965), _row("batch", "batch", 64)
    (('TPOT [ms]', '39.65'), ('batch', '64'))
    """
    if key in _MS_KEYS and isinstance(v, float) and head.endswith(" [s]"):
        return head[: -len(" [s]")] + " [ms]", _cell(units.s_to_ms(v))
    return head, _cell(v)


def _cell(v) -> str:
    """A value as the table prints it: yes/no, n/a for NaN (no price), - for none, 4 significant digits, and
    thousands separated from 1,000 up (``8,325``; whole from 10,000, not ``1.687e+04``) to 1e15, an exponent
    beyond (a request rate of 1e-300 per second gave a 300-digit energy per request). Counts (input tokens,
    batch) are separated as the floats are: ``2,000``, not ``2000`` beside a throughput of ``9,801``.

    >>> [_cell(x) for x in (16870.4, 33300.0, 8325.2, 0.6204, float("nan"), True, None, 7.5475e302)]
    ['16,870', '33,300', '8,325', '0.6204', 'n/a', 'yes', '-', '7.547e+302']
    >>> [_cell(x) for x in (32768, 2000, 291)]  # whole numbers (--input-tokens 32768) as the floats
    ['32,768', '2,000', '291']
    """
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "n/a"
        return f"{v:.4g}" if abs(v) >= 1e15 else f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:,.4g}"
    if isinstance(v, numbers.Integral):  # a Python or numpy integer
        return f"{int(v):,}"
    return "-" if v is None else str(v)


def _compare_designs(model, systems, qps, traffic, ttft_slo_ms, tpot_slo_ms, json_, cat, **kw) -> None:
    """``infer --systems a,b --qps Q`` with SLOs: each design's cheapest configuration at the rate, one row each
    (:func:`hnplan.planning.inference.gpus_vs_rate`, the serving report's table: GPUs used and bought, latencies,
    power, $ per million output tokens on both), then :func:`~hnplan.planning.inference.capacity_verdict`."""
    from rich.table import Table

    from hnplan.planning.inference import capacity_verdict, gpus_vs_rate

    df = gpus_vs_rate(model, systems, [qps], traffic, units.MILLI * ttft_slo_ms, units.MILLI * tpot_slo_ms, cat, **kw)
    rows = [{k: v for k, v in r.items() if not isinstance(v, float) or v == v} for r in df.to_dict("records")]
    verdict = capacity_verdict(df)
    if json_:
        print_json({"model": cat.model(model).id, "qps": qps, "designs": rows, "verdict": verdict})
        return
    t = Table(
        title=f"{cat.model(model).id} at {qps:g} requests/s, TTFT <= {ttft_slo_ms:g} ms, TPOT <= {tpot_slo_ms:g} ms"
    )
    heads = ("design", "layout", "batch cap", "replicas", "GPUs", "GPUs bought", "TTFT [ms]", "TPOT [ms]",
             "facility power [kW]", "$ per M output tokens", "  on the GPUs bought", "status")  # fmt: skip
    for h in heads:
        t.add_column(h, justify="left" if h in ("design", "layout", "status") else "right")
    for r in rows:
        if r.get("status") != "ok":
            t.add_row(r["system"], *["-"] * (len(heads) - 2), r["status"])
            continue
        bought = r.get("usd_per_million_tokens_bought")
        t.add_row(
            r["system"],
            f"TP{r['tp']} EP{r['ep']} PP{r['pp']}",
            f"{r['batch']:,}",
            f"{r['replicas']:,}",
            f"{r['gpus']:,}",
            f"{r.get('gpus_bought', r['gpus']):,}",
            f"{units.s_to_ms(r['ttft_s']):,.4g}",
            f"{units.s_to_ms(r['tpot_s']):,.4g}",
            f"{r['facility_power_kw']:,.1f}",
            _cell(r["usd_per_million_tokens"]),
            "-" if bought is None else _cell(bought),
            "ok",
        )
    console.print(t)
    console.print(verdict.replace("**", "").replace("\\$", "$"), highlight=False, markup=False)


@app.command()
def infer(
    model: str = typer.Option(..., "--model", help="model id or YAML path"),
    systems_typed: list[str] = typer.Option(
        ...,
        "--system",
        "--systems",
        help="system id or YAML path; several (comma-separated or the option repeated) with --qps compare designs",
    ),
    input_tokens: int = typer.Option(
        ..., "--input-tokens", parser=count(integer=True), metavar="COUNT", help="prompt length [tokens] (2k = 2,000)"
    ),
    output_tokens: int = typer.Option(
        None,
        "--output-tokens",
        parser=count(integer=True),
        metavar="COUNT",
        help="generated tokens per request (default 1: the first token alone; needed with --tpot-slo-ms)",
    ),
    tp: int = typer.Option(
        None, "--tp", min=1, help="tensor-parallel degree (searched if omitted: the most output tokens/s per GPU)"
    ),
    ep: int = typer.Option(None, "--ep", min=1, help="expert-parallel degree (MoE; searched if omitted)"),
    pp: int = typer.Option(None, "--pp", min=1, help="pipeline-parallel degree (default: smallest that fits)"),
    batch: int = typer.Option(None, "--batch", min=1, help="concurrent sequences per replica"),
    qps: float = typer.Option(None, "--qps", help="request rate to serve [requests/s] (> 0)"),
    ttft_slo_ms: float = typer.Option(None, "--ttft-slo-ms", help="mean time-to-first-token bound [ms] (> 0)"),
    tpot_slo_ms: float = typer.Option(None, "--tpot-slo-ms", help="mean time-per-output-token bound [ms] (> 0)"),
    input_cv: float = typer.Option(
        0.0,
        "--input-cv",
        help="coefficient of variation of the prompt length, log-normal about --input-tokens (--qps; default 0: fixed)",
    ),
    output_cv: float = typer.Option(
        0.0,
        "--output-cv",
        help="coefficient of variation of the output length, log-normal about --output-tokens (--qps; 0: fixed)",
    ),
    ttft_quantile: str = typer.Option(
        "mean",
        "--ttft-quantile",
        help="the TTFT --ttft-slo-ms bounds: mean, p50, p90, p95 or p99 (the queueing wait at that percentile)",
    ),
    dtype: str = typer.Option(
        "bf16",
        "--dtype",
        callback=dtype_name,
        help="weights/GEMMs: bf16, fp8, int8 (W8A8) or fp4 (each needs that peak)",
    ),
    kv_dtype: str = typer.Option(
        None, "--kv-dtype", callback=dtype_name, help="KV cache dtype (default bf16 for bf16, else fp8)"
    ),
    disaggregate: bool = typer.Option(False, "--disaggregate", help="separate prefill and decode pools (with --qps)"),
    overlap: bool = typer.Option(False, "--overlap", help="overlap collectives with compute (two micro-batches)"),
    chunked_prefill: int = typer.Option(
        None,
        "--chunked-prefill",
        parser=count(integer=True),
        metavar="COUNT",
        help="prefill chunk per iteration [tokens] (default: whole prompts)",
    ),
    score_latency_ms: float = typer.Option(
        None, "--score-latency-ms", help="short scoring requests: requests/s per node within this latency [ms] (> 0)"
    ),
    engine: str = typer.Option(
        None,
        "--engine",
        help="serving engine id or YAML path (data/engines: vllm, sglang, "
        f"tensorrt-llm, ...): batch cap, chunked prefill, memory fraction, host time per step; default none: {NO_ENGINE}",
    ),
    gpu_memory_utilization: float = typer.Option(
        None,
        "--gpu-memory-utilization",
        help="fraction of the visible HBM the engine may use, in (0, 1] (vLLM's; default the engine's or "
        "memory.yaml's)",
    ),
    kv_budget_gib: float = typer.Option(
        None, "--kv-budget-gib", help="KV cache per GPU set directly [GiB] (> 0; vLLM's kv_cache_memory_bytes)"
    ),
    kv_reserve: str = typer.Option(
        "full",
        "--kv-reserve",
        callback=dtype_name,
        help="KV cache each sequence in flight holds against memory (without --qps): full, I + O (a static "
        "reservation's worst case), or mean, I + O/2 (a paged cache's average, vLLM's PagedAttention)",
    ),
    json_: bool = typer.Option(False, "--json", help="print one JSON object"),
):
    """TTFT, TPOT, throughput and max batch of a replica; with --qps and SLOs the replicas, GPUs, power
    and $ per million output tokens of the cheapest configuration that meets them.

    With neither --batch nor --qps it reports the maximum-throughput operating point (the batch that
    maximises output tokens/s within memory), as throughput benchmarks at an unbounded rate do.
    """
    # planners (numpy, pandas, the catalog) are imported when the command runs, not for its --help
    from hnplan.catalog import load_catalog
    from hnplan.catalog.checks import check_refs
    from hnplan.errors import check_choice
    from hnplan.planning.inference import (
        KV_RESERVES,
        Replica,
        Traffic,
        operating_point,
        plan_for_rate,
        scoring_capacity,
    )
    from hnplan.planning.inference.capacity import purchase_columns
    from hnplan.planning.inference.queueing import TTFT_QUANTILES

    # --system a --system b or --system a,b; a design named twice is planned once
    systems = list(dict.fromkeys(x.strip() for text in systems_typed for x in text.split(",") if x.strip()))
    with handle_errors():
        flag = typed_flag(current_context(), "systems_typed")  # --system or --systems, as typed, in the messages
        if not systems:
            raise InputError(f"{flag} names no system; give an id (data/systems) or a YAML path")
        if len(systems) > 1 and (qps is None or disaggregate or score_latency_ms is not None):
            raise InputError(
                "several systems compare designs at a request rate: give --qps with --ttft-slo-ms and --tpot-slo-ms "
                f"(without --disaggregate or --score-latency-ms), or one {flag}"
            )
        system = systems[0]
        check_refs(
            {
                "--model": ("models", model),
                **{f"{flag} {x}": ("systems", x) for x in systems},
                "--engine": ("engines", engine),
            }
        )
        check_expert_flags(model, ep=ep)
        for flag, value in (
            ("--qps", qps),
            ("--ttft-slo-ms", ttft_slo_ms),
            ("--tpot-slo-ms", tpot_slo_ms),
            ("--score-latency-ms", score_latency_ms),
        ):
            if value is not None and not value > 0:
                raise InputError(f"{flag} must be > 0; got {value:g}")
        if batch is not None and qps is not None:
            raise InputError("give at most one of --batch and --qps")
        if qps is not None and (ttft_slo_ms is None or tpot_slo_ms is None):
            raise InputError("--qps needs --ttft-slo-ms and --tpot-slo-ms")
        check_choice("--ttft-quantile", ttft_quantile, tuple(TTFT_QUANTILES))
        for flag, cv in (("--input-cv", input_cv), ("--output-cv", output_cv)):
            if not 0 <= cv < math.inf:
                raise InputError(f"{flag} must be a finite number >= 0; got {cv:g}")
            if cv and qps is None:  # the other modes time one fixed request shape
                raise InputError(f"{flag} applies to --qps planning (lengths drawn per request); give --qps too")
        if ttft_quantile != "mean" and qps is None:
            raise InputError("--ttft-quantile applies to --qps planning (the queueing wait); give --qps too")
        if qps is None and (ttft_slo_ms is not None or tpot_slo_ms is not None):
            raise InputError("--ttft-slo-ms and --tpot-slo-ms apply to --qps planning; give --qps too")
        if disaggregate and qps is None:
            raise InputError("--disaggregate applies to --qps planning")
        if kv_reserve not in KV_RESERVES:
            raise InputError(f"--kv-reserve must be one of {', '.join(KV_RESERVES)}; got {kv_reserve!r}")
        if kv_reserve != "full" and (qps is not None or score_latency_ms is not None):
            raise InputError(
                "--kv-reserve mean applies without --qps and --score-latency-ms (the rate planner holds the "
                "99th percentile of I + O of its traffic)"
            )
        if output_tokens is None:
            if tpot_slo_ms is not None:  # a one-token answer has no time per output token to bound
                raise InputError(
                    "--tpot-slo-ms bounds the time per output token: give --output-tokens (the default, 1, is the "
                    "first token alone)"
                )
            output_tokens = 1
        cat = load_catalog()
        m = cat.model(model)
        if input_tokens + output_tokens > m.max_seq:
            raise InputError(
                f"--input-tokens + --output-tokens = {input_tokens + output_tokens:,} exceeds "
                f"{m.id}'s maximum sequence length {m.max_seq:,} (field max_seq)"
            )
        fixed = {k: v for k, v in dict(tp=tp, ep=ep, pp=pp).items() if v is not None}
        settings = {
            k: v
            for k, v in dict(
                memory_utilization=gpu_memory_utilization, kv_budget_gib=kv_budget_gib, engine=engine
            ).items()
            if v is not None
        }
        given = (
            Replica(tp or 1, ep or 1, pp or 1, dtype, kv_dtype, overlap, **settings) if {"tp"} <= set(fixed) else None
        )
        if given is not None and cat.model(model).moe is not None and ep is None:
            given = None  # EP of an MoE model left to the search
        if len(systems) > 1:  # designs side by side at the rate: the report's table and verdict, on the command line
            _compare_designs(
                model, systems, qps, Traffic.lognormal(input_tokens, output_tokens, input_cv, output_cv), ttft_slo_ms,
                tpot_slo_ms, json_, cat, dtype=dtype, kv_dtype=kv_dtype, fixed=fixed, chunked_prefill=chunked_prefill,
                overlap=overlap, engine=engine, ttft_quantile=ttft_quantile,
                settings={k: v for k, v in settings.items() if k != "engine"},
            )  # fmt: skip
            return
        if score_latency_ms is not None:
            out = scoring_capacity(
                model,
                system,
                input_tokens,
                units.MILLI * score_latency_ms,
                given,
                cat,
                dtype,
                kv_dtype=kv_dtype,
                fixed=fixed,
                overlap=overlap,
                settings=settings,
            )
            out.update(model=cat.model(model).id, system=cat.system(system).id, input_tokens=input_tokens)
            title = "short requests"
        elif qps is not None:
            try:
                plan = plan_for_rate(
                    model,
                    system,
                    qps,
                    Traffic.lognormal(input_tokens, output_tokens, input_cv, output_cv),
                    units.MILLI * ttft_slo_ms,
                    units.MILLI * tpot_slo_ms,
                    dtype=dtype,
                    kv_dtype=kv_dtype,
                    fixed=fixed,
                    disaggregated=disaggregate,
                    chunked_prefill=chunked_prefill,
                    overlap=overlap,
                    catalog=cat,
                    settings=settings,
                    ttft_quantile=ttft_quantile,
                )
            except InfeasiblePlan as exc:
                raise InfeasiblePlan(str(exc) + _seconds_hint(ttft_slo_ms, tpot_slo_ms)) from None
            out = plan.to_dict()
            if kv_budget_gib is not None:  # capped where the HBM left after the weights holds less (said, not silent)
                from hnplan.planning.inference.core import resolve
                from hnplan.planning.inference.points import kv_budget_note

                out.update(kv_budget_note(resolve(cat.model(model), cat.system(system), plan.replica, cat)))
            title = f"{qps:,.0f} requests/s" if qps >= 1000 and qps == int(qps) else f"{qps:g} requests/s"
        else:
            out = operating_point(
                model,
                system,
                input_tokens,
                output_tokens,
                replica=given,
                batch=batch,
                dtype=dtype,
                kv_dtype=kv_dtype,
                fixed=fixed,
                overlap=overlap,
                catalog=cat,
                chunked_prefill=chunked_prefill,
                settings=settings,
                kv_reserve=kv_reserve,
            )
            title = "batch " + str(batch) if batch else "maximum throughput"
        rate = out.get("usd_per_gpu_hour", 0.0)
        if "cost_note" not in out and (
            rate is None or rate != rate
        ):  # no price: why the costs are n/a, as without --qps
            from hnplan.planning.inference.points import price_gap

            if gap := price_gap(cat.system(system), cat):
                out["cost_note"] = f"n/a: {gap}"
        from hnplan.planning.calibration_note import uncalibrated_sentence

        # the serving model times memory-bound kernels by the chip's memory_kernel_efficiency (no sustained clock)
        calibration = uncalibrated_sentence(
            [cat.system(system).accelerator], cat, ("memory_kernel_efficiency",), style="plain" if json_ else "markdown"
        )
        if calibration:
            out["calibration_note"] = calibration
        unit = cat.system(system).unit_gpus
        # the price per token counts the GPUs used; where whole units must be bought, what the idle ones add when
        # nothing else uses them (the price per GPU-hour times the GPUs bought)
        purchase = purchase_columns(out.get("gpus"), out.get("usd_per_million_tokens"), cat.design(system))
        bought, on_bought = purchase.get("gpus_bought"), purchase.get("usd_per_million_tokens_bought")
        if json_:
            if bought is not None:  # whole racks or servers, as tco, compare and size report them
                out = {**out, "gpus_bought": bought}
            if on_bought is not None:
                out = {**out, "usd_per_million_tokens_bought": on_bought}
            print_json(out)
            return
        split = isinstance(out.get("prefill"), dict)  # disaggregated: the layout rows are the decode pool's

        def header(k: str) -> str:
            if k == "batch" and qps is not None:  # the rate planner's slots: the cap an engine is set to
                return "batch cap per replica (the engine's max_num_seqs)"
            if k == "ttft_s" and out.get("ttft_quantile", "mean") != "mean":  # the percentile the bound judged
                return f"TTFT, {out['ttft_quantile']} [s]"
            if k == "ttft_mean_s":
                return "TTFT, mean [s]"
            h = _HEADER.get(k) or column_header(k)
            if split and k in ("tp", "ep", "pp", "gpus_per_replica"):
                return f"decode {h}"
            return "replicas (prefill + decode)" if split and k == "replicas" else h

        shown = (
            k for k, v in out.items() if not isinstance(v, dict) and k not in ("calibration_note", "ttft_quantile")
        )
        rows = [_row(header(k), k, out[k]) for k in shown]
        if "engine" in out and out["engine"] is None:  # the default, named: not "-"
            rows = [(h, f"none ({NO_ENGINE})" if h == header("engine") else c) for h, c in rows]
        if bought is not None and out["gpus"] % unit:  # what is bought: whole racks or servers
            at = next(i for i, (k, _) in enumerate(rows) if k == header("gpus")) + 1
            used = f"$ and rated power: the {out['gpus']:,} used"
            rows.insert(at, ("GPUs bought", f"{whole_units_text(out['gpus'], bought, unit)}; {used}"))
        if on_bought is not None:  # beside the price per token on the GPUs used
            at = next(i for i, (k, _) in enumerate(rows) if k == header("usd_per_million_tokens")) + 1
            rows.insert(at, (f"  on the {bought:,} GPUs bought", _cell(on_bought)))
        if split:
            rows += [_row(f"prefill {column_header(k)}", k, v) for k, v in out["prefill"].items()]
        console.print(kv_table(f"{out['model']} on {out['system']}: {title}", rows))
        if calibration:
            console.print(calibration, highlight=False, markup=False)
