"""memory: a mixture of experts that does not fit at --ep 1 (the default) is told to give --ep; exit 3 as before."""

import pytest
from typer.testing import CliRunner

from hnplan.cli import app

runner = CliRunner()
PLAN = ["memory", "--model", "deepseek-v3", "--mode", "train", "--tp", "1", "--pp", "8", "--dp", "32", "--seq-len",
        "4096", "--microbatch-size", "1", "--zero", "1", "--recompute", "selective", "--system", "dgx-b300"]  # fmt: skip


def test_an_moe_that_does_not_fit_at_ep_1_is_told_to_give_ep():
    r = runner.invoke(app, PLAN)
    assert r.exit_code == 3
    assert r.stderr.strip().endswith(
        "(at --ep 1, the default, every GPU holds all 256 routed experts: give --ep to spread them, a divisor of the "
        "experts and of tp x cp x dp, the ranks the expert layers split)"
    )
    # with the experts spread over 32 GPUs the same plan fits (168.8 GiB of the B300's 268.6)
    import json

    fits = runner.invoke(app, [*PLAN, "--ep", "32", "--json"])
    assert fits.exit_code == 0
    d = json.loads(fits.stdout)
    assert d["total_gib"] == pytest.approx(168.8, abs=0.05) and d["hbm_gib"] == pytest.approx(268.6, abs=0.05)


def test_a_dense_model_gets_no_expert_advice():
    r = runner.invoke(app, ["memory", "--model", "llama3.1-405b", "--mode", "train", "--tp", "1", "--pp", "1",
                            "--dp", "8", "--seq-len", "8192", "--system", "dgx-b300"])  # fmt: skip
    assert r.exit_code == 3 and "--ep" not in r.stderr
