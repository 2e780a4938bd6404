"""Names for people: a result column or quantity name (``step_time_s_super``, ``tp_comm_exposed``) as the
words and unit a person reads (``step time, supernode [s]``, ``TP communication exposed``).

Used by the report tables (:mod:`hnplan.plots.tables`) and the command line's tables; imports nothing
heavy, so a command pays nothing for it. Formatting only: no value is computed here.
"""

from __future__ import annotations

# Unit suffixes of column names (CONVENTIONS: unit last) and the header unit they stand for.
_UNIT_SUFFIXES = (
    ("_s", "s"),
    ("_days", "days"),
    ("_hours", "h"),
    ("_gib", "GiB"),
    ("_GBps", "GB/s"),
    ("_gbps", "Gb/s"),
    ("_usd", "USD"),
    ("_pct", "%"),
    ("_kw", "kW"),
    ("_w", "W"),
)
# Trailing qualifiers: which design or tier a column belongs to.
_QUALIFIERS = {
    "base": "servers",
    "super": "supernode",
    "older": "older chip",
    "hbm": "HBM only",
    "pool": "memory pool",
    "vs_older": "against the older chip",
}
# Words of the field written its way.
_WORDS = {
    "gpus": "GPUs",
    "gpu": "GPU",
    "mfu": "MFU",
    "hfu": "HFU",
    "ttft": "TTFT",
    "tpot": "TPOT",
    "kv": "KV",
    "slo": "SLO",
    "it": "IT",
    "iops": "IOPS",
    "comm": "communication",
    "mtok": "M tokens",
    "pflops": "PFLOP/s",
    "scaleout": "scale-out",
    "speedup": "speed-up",
    "nic": "NIC",
    "hbm": "HBM",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "ep": "EP",
    "cp": "CP",
    "usd": "$",
    "id": "id",
    "GBps": "GB/s",
    "gbps": "Gb/s",
    "tflops": "TFLOP/s",
    "gb": "GB",
    "gib": "GiB",
    "kw": "kW",
    "tdp": "TDP",
    "fp8": "FP8",
    "rdma": "RDMA",
    "tcp": "TCP",
}
# Columns without a unit suffix whose values are ratios or shares (header unit ``[-]``).
_DIMENSIONLESS = ("speedup", "share", "fraction", "ratio", "reduction", "margin", "goodput", "slowdown", "mfu", "to")
# Names the generic rule words badly (after the qualifier is taken off): header words and unit.
_HEADERS = {
    "tokens_per_s": ("throughput", "tokens/s"),
    "requests_per_s_per_node": ("request rate per node", "requests/s"),
    "server_pflops_per_rack": ("servers' compute per rack", "PFLOP/s"),
    "supernode_pflops_per_rack": ("supernode compute per rack", "PFLOP/s"),
    "usd_per_gpu_hour": ("price", "$ per GPU-hour"),
    "usd_per_mtok": ("cost", "$ per M tokens"),
    "iops": ("IOPS", "operations/s"),
    "days": ("time to train", "days"),
    "params": ("parameters", "count"),
    "gpus": ("GPUs", "count"),
    "domain_gpus": ("scale-up domain", "GPUs"),
    "failure_unit_gpus": ("failure unit", "GPUs"),
    "gpus_in_repair": ("GPUs in repair", "GPUs"),
    "spare_gpus": ("spare GPUs", "GPUs"),
    "cables_per_gpu": ("cables per GPU", "cables"),
    "servers_per_rack": ("servers per rack", "servers"),
    "storage_units": ("storage units", "units"),
    "technician_hours": ("technician time", "h"),
    "step_s": ("step time", "s"),
    "deploy_days": ("deployment time", "days"),
    "share_margin": ("communication share margin", "-"),
    "downtime_per_failure_s": ("downtime per failure", "s"),
    "qps": ("request rate", "requests/s"),
    "tokens_per_s_per_gpu": ("throughput per GPU", "tokens/s"),
    "tokens_per_s_per_user": ("throughput per user", "tokens/s"),
    "joules_per_token": ("energy per token", "J"),
    "joules_per_request": ("energy per request", "J"),
    # the procurement and design-space inputs and outputs, as a report's reader would name them
    "tco_usd": ("TCO", "$"),
    "days_to_train": ("time to train", "days"),
    "rate_factor": ("failure-rate factor", "-"),
    "hardware_price_factor": ("hardware price factor", "-"),
    "pue": ("PUE", "-"),
    "electricity_usd_per_kwh": ("electricity price", "$ per kWh"),
    "facility_power_mw": ("facility power", "MW"),
}


def name_and_unit(name: str) -> tuple[str, str]:
    """A column or quantity name as words and its unit (``""`` when the name carries none, ``"-"`` for a
    ratio or share): the two halves of :func:`column_header`.

    >>> name_and_unit("comm_share"), name_and_unit("downtime_per_failure_s"), name_and_unit("days")
    (('communication share', '-'), ('downtime per failure', 's'), ('time to train', 'days'))
    """
    base, qualifier = name, ""
    for q in sorted(_QUALIFIERS, key=len, reverse=True):
        if base.endswith("_" + q) and len(base) > len(q) + 1:
            base, qualifier = base[: -len(q) - 1], _QUALIFIERS[q]
            break
    if base in _HEADERS:
        words, unit = _HEADERS[base]
    else:
        unit = ""
        for suffix, u in _UNIT_SUFFIXES:
            if base.endswith(suffix) and len(base) > len(suffix):
                base, unit = base[: -len(suffix)], u
                break
        if not unit and any(w in base.split("_") for w in _DIMENSIONLESS):
            unit = "-"
        words = " ".join(_WORDS.get(w, w) for w in base.split("_"))
    return words + (f", {qualifier}" if qualifier else ""), unit


def column_header(name: str) -> str:
    """A column name as a header a person reads, with its unit in brackets where the name carries one.

    >>> column_header("step_time_s_super"), column_header("usd_per_mtok_base"), column_header("nic_gbps")
    ('step time, supernode [s]', 'cost, servers [$ per M tokens]', 'NIC [Gb/s]')
    >>> column_header("speedup_vs_older"), column_header("seed_file"), column_header("read_GBps")
    ('speed-up, against the older chip [-]', 'seed file', 'read [GB/s]')
    >>> column_header("tokens_per_s_base"), column_header("rdma_busbw_GBps_at_100g")
    ('throughput, servers [tokens/s]', 'RDMA busbw GB/s at 100g')
    """
    text, unit = name_and_unit(name)
    return f"{text} [{unit}]" if unit else text


def quantity_text(name: str, value: str, unit: str = "") -> str:
    """A quantity with its value as a sentence writes it: words, value, unit (none for a ratio).

    >>> quantity_text("comm_share", "0.6"), quantity_text("iops", "1M"), quantity_text("deploy_days", "1")
    ('communication share 0.6', 'IOPS 1M operations/s', 'deployment time 1 days')
    """
    words, u = name_and_unit(name)
    unit = unit.strip() or ("" if u == "-" else u)
    return f"{words} {value}" + (f" {unit}" if unit else "")
