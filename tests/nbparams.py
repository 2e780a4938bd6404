"""Small parameters for every notebook: the notebook tests, the report tests and the browser check
use them, so every notebook runs in a few seconds. A notebook's own test module (tests/test_nb_<name>.py)
may define ``SMALL`` instead; :func:`small_params` finds either."""

import importlib
from pathlib import Path

NOTEBOOKS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

SMALL_PARAMS = {
    "design_comparison": dict(
        model="llama3.1-8b",
        systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
        gpus=144,
        tokens=1e11,
        seq_len=4096,
        global_batch_tokens=4096 * 288,
        dtype="bf16",
    ),
    "validation": dict(areas=["communication", "memory"]),
    "claims_audit": dict(
        models=["megatron-18.4b", "megatron-145.6b"],
        gpus=[576, 1152],
        hundred_b_models=["megatron-76.1b"],
        hundred_b_gpus=[576],
        vision_gpus=[4608],
        trillion_gpus=[1296],
        nic_models=["megatron-18.4b"],
        nic_gpus=[576],
        scoring_models=["megatron-1.7b", "megatron-7.5b"],
        iops_models=["megatron-1.7b", "megatron-145.6b"],
        cluster_gpus=288,
        cluster_jobs=1500,
        cluster_loads=[0.5, 0.9],
        cluster_replications=3,
    ),
}


def small_params(name: str) -> dict:
    """Small parameters of a notebook (KeyError if it has none: every notebook must)."""
    if name in SMALL_PARAMS:
        return SMALL_PARAMS[name]
    return importlib.import_module(f"test_nb_{name}").SMALL
