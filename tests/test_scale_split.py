"""tools/scale_split.py: one job's step at two sizes split into shared work and a per-step constant,
``T = W / N + F`` (docs/training.md, "What grows with scale")."""

import pytest
from toolmod import load_tool


def _tool():
    return load_tool("scale_split")


def test_llama3_as_run_pair_by_hand(capsys):
    # Llama 3 paper Table 4: 430 TFLOP/s per GPU on 8,192 H100 and 400 on 16,384, one batch of 2,048 x 8,192
    # tokens; the step is T = tokens x model FLOPs per token / (N x rate), the tool printing it to 1 ms
    tool = _tool()
    tool.main("llama3-405b-8192-no-recompute", "llama3-405b-16384-no-recompute")
    published, modelled = capsys.readouterr().out.splitlines()
    t1, t2 = (float(x) for x in published.split("T = ")[1].split(" s at")[0].split(" / "))
    # the two published step times share the tokens and FLOPs per token: T2 / T1 = (430 x 8,192) / (400 x 16,384)
    assert t2 / t1 == pytest.approx(430 / (2 * 400), rel=2e-4)
    assert t1 == pytest.approx(12.504, abs=0.001)
    # W / N2 = (T1 - T2) / (N2 / N1 - 1) and F = T2 - W / N2, with N2 / N1 = 2
    w = (t1 - t2) / (2 - 1)
    assert w == pytest.approx(5.783, abs=0.002) and t2 - w == pytest.approx(0.938, abs=0.002)
    assert published.endswith("W/N = 5.783 s, F = 0.938 s")  # docs/training.md's table: 5.78, 0.94
    assert modelled.startswith("modelled")


def test_two_different_jobs_are_refused():
    tool = _tool()
    with pytest.raises(SystemExit, match="not one job at two sizes"):
        tool.main("llama3-405b-8192-no-recompute", "llama3-405b-16384-cp16-allgather")
    with pytest.raises(SystemExit, match="unknown run id"):
        tool.main("llama3-405b-8192-no-recompute", "no-such-run")
