"""Interruptions of a large job against the Llama 3 paper's 54-day snapshot and Meta's cluster study."""

from __future__ import annotations

from hnplan import units
from hnplan.planning.design import estimate_reliability
from hnplan.reliability import mtbi_s
from hnplan.validation.rows import Row, area

LLAMA3 = "The Llama 3 Herd of Models, arXiv:2407.21783, Sec. 3.3.4 and Table 5 (16,384 H100, 54 days)"
RSC = "Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters, arXiv:2410.21680 (job MTTF vs size)"


@area("reliability")
def rows(cat) -> list[Row]:
    s = cat.system("hgx-h100-roce-400g")
    m = mtbi_s(cat.design(s), 16384)
    unexpected = 54 * units.DAY / m
    est = estimate_reliability(s, 16384, "llama3.1-405b", catalog=cat)
    return [
        Row(
            "reliability",
            "Llama 3 405B, 16,384 H100, 54 days",
            "unexpected interruptions",
            "count",
            419.0,
            unexpected,
            "calibration",
            0.05,
            LLAMA3,
            "the component rates are derived from this table",
        ),
        Row(
            "reliability",
            "Llama 3 405B, 16,384 H100, 54 days",
            "effective training time (> 90%)",
            "fraction",
            0.90,
            est.job_goodput,
            "bound",
            1.11,
            LLAMA3,
            "published as a lower bound for the job; hnplan's job goodput (without the GPUs held in repair, "
            "which Meta's spare servers covered) must exceed it",
        ),
        Row(
            "reliability",
            "16,384-GPU job (Meta RSC projection)",
            "mean time to failure",
            "h",
            1.8,
            units.s_to_hours(mtbi_s(cat.design(s), 16384)),
            "reported",
            None,
            RSC,
            "different fleet (A100 research clusters) and failure counting than the Llama 3 rates",
        ),
    ]
