"""tools/strong_scale_terms.py: the communication of a row's plan with nothing hidden, against its measured step
(docs/training.md, "Llama 3.1 8B strong scaling, candidate by candidate")."""

import re

import pytest
from toolmod import load_tool

ROW = "mlperf-v60-nvidia-gb200-llama31-8b-1024"


def _tool():
    return load_tool("strong_scale_terms")


def _ms(text: str, label: str) -> float:
    return float(re.search(rf"{label} ([0-9.]+) ms", text).group(1))


def test_gb200_1024_ring_and_no_overlap_bound(capsys):
    _tool().main([ROW])
    out = capsys.readouterr().out
    # TP 4, CP 4, 32 layers: Transformer Engine's ring sends cp - 1 = 3 K/V blocks forward and, backward, the K/V,
    # cp - 2 = 2 messages of K/V with dK/dV and the dK/dV: 7 a layer, 224 a step
    assert "224 messages" in out
    # the block: 8,192 / 4 tokens x 2 (K and V) x ceil(8 KV heads / 4) x 128 x 2 bytes = 2 MiB over NVLink, the
    # two-block message 4 MiB; hnplan's send/receive on the GB200's NVLink (alpha 1.9 us, 694.8 GB/s):
    # 1.9 + 2,097,152 / 694.8e3 = 4.92 us and 1.9 + 4,194,304 / 694.8e3 = 7.94 us, so
    # 32 x (3 x 4.92 + 2 x 4.92 + 2 x 7.94) us = 1.29 ms
    assert _ms(out, "messages,") == pytest.approx(
        32 * (5 * (1.9 + 2097152 / 694.8e3) + 2 * (1.9 + 4194304 / 694.8e3)) / 1e3, abs=0.01
    )
    measured = _ms(out, "measured")
    assert measured == pytest.approx(72.1)
    # every collective on the critical path still leaves the modelled step short of the measured one
    no_overlap = _ms(out, "no overlap at all:")
    parts = _ms(out, "compute") + sum(float(x) for x in re.findall(r"([0-9.]+) ms all", out))
    assert no_overlap == pytest.approx(parts, abs=0.2)  # plus the optimizer's 0.05 ms, each printed to 0.01-0.1 ms
    assert no_overlap < measured
    assert "communication cannot close the gap at any overlap fraction or SM slowdown up to 1" in out
    # the operator table's kernel classes add up to the modelled compute (32.6 ms on the row's nemo-mlperf-v60), and
    # each alone would have to run (class + gap) / class times as long to close the 28.2 ms gap (the factor printed
    # from the unrounded times, the check from the printed ones: 0.015 apart at most)
    classes = {k: float(v) for k, v in re.findall(r"(GEMMs|attention|other kernels) ([0-9.]+) ms", out)}
    assert sum(classes.values()) == pytest.approx(_ms(out, "compute"), abs=0.3)
    factor = float(re.search(r"GEMMs [0-9.]+ ms \(x([0-9.]+) to close", out).group(1))
    gap = float(re.search(r"gap \+([0-9.]+) ms", out).group(1))
    assert factor == pytest.approx((classes["GEMMs"] + gap) / classes["GEMMs"], abs=0.015)


def test_rows_communication_can_close_print_the_share_to_expose(capsys):
    # University of Florida, 256 B200 (CP 2): all collectives on the critical path overshoot the measured step, so
    # the tool prints the share of the hidden communication that closing the gap would expose
    _tool().main(["mlperf-v51-uf-b200-llama31-8b-256"])
    out = capsys.readouterr().out
    share = float(re.search(r"exposes ([0-9]+)% of what is hidden", out).group(1)) / 100
    gap = float(re.search(r"gap \+([0-9.]+) ms", out).group(1))
    hideable = _ms(out, "no overlap at all:") - float(re.search(r"modelled ([0-9.]+) ms", out).group(1))
    assert share == pytest.approx(gap / hideable, abs=0.01)


def test_per_kernel_cost_closing_1024_turns_the_one_rack_row_pessimistic(capsys):
    # docs/training.md, "(e) The GPU-side cost of a kernel boundary": the GB200 1,024 row missed 26.9 ms over its
    # 2,409 kernels on nemo-mlperf-v50, 11.1 us a kernel (28.2 ms, 11.7 us on its 26.04 stack). The same recipe in one rack (72 GPUs, TP 1 CP 2, the same whole-step CUDA
    # graph and FP8 current scaling) runs 1,641 kernels a step: 11.1 us more on each adds 1,641 x 11.1 us = 18.2 ms
    # to its modelled 164.1 ms, 182.3 ms against the measured 170.9 ms: +6.7 % where the row reads -4.0 % today
    tool = _tool()
    tool.main([ROW], per_kernel_us=11.1)
    out = capsys.readouterr().out
    assert re.search(r"in 2,409 kernels: gap / kernel 11\.7 us", out)
    assert _ms(out, "with 11.1 us more per kernel:") == pytest.approx(43.95 + 2409 * 11.1e-3, abs=0.1)
    tool.main(["mlperf-v51-nvidia-gb200-llama31-8b-72"], per_kernel_us=11.1)
    out = capsys.readouterr().out
    assert "in 1,641 kernels" in out
    assert _ms(out, "with 11.1 us more per kernel:") == pytest.approx(164.1 + 1641 * 11.1e-3, abs=0.1)
    assert "(+6.7 % of measured, now -4.0 %)" in out


def test_per_event_costs_to_close(capsys):
    # docs/training.md, "Small tokens per GPU": at TP 4 CP 4 a layer awaits its ring's 7 messages (cp - 1 forward,
    # cp backward) and runs 16 userbuffers ring steps (the QKV and FC1 all-gathers aggregated, 4 / 2 = 2 chunks
    # each, the output-projection and FC2 reduce-scatters 4 each, the two data-gradient all-gathers 2 each) and 4
    # bulk overlaps (QKV and FC1 data and weight gradients): 32 x 7 = 224 waits and 32 x 20 = 640 steps; the
    # 28.2 ms gap over them (the row's nemo-mlperf-v60; 26.9 ms on nemo-mlperf-v50) is 126 and 44 us each
    tool = _tool()
    tool.main([ROW])
    out = capsys.readouterr().out
    assert "224 ring waits (126 us each to close)" in out
    assert "640 userbuffers steps (44 us each to close)" in out
    # TP 2 CP 4 (the GB200 512 row, 22.4 ms gap): ring exchange in 2 chunks throughout, 12 ring steps and 4 bulk
    # overlaps a layer, 512 a step: 44 us each; the ring's 224 waits 100 us each
    tool.main(["mlperf-v51-nvidia-gb200-llama31-8b-512"])
    out = capsys.readouterr().out
    assert "224 ring waits (100 us each to close), 512 userbuffers steps (44 us each to close)" in out
    # TP 1 CP 2 in one rack: 32 x 3 = 96 waits, no userbuffers; TP 1 CP 1: neither, no line
    tool.main(["mlperf-v51-nvidia-gb200-llama31-8b-72"])
    out = capsys.readouterr().out
    assert "waits / steps: 96 ring waits (71 us each to close)\n" in out
    tool.main(["mlperf-v51-cisco-h100-llama31-8b-64"])
    assert "waits / steps" not in capsys.readouterr().out


def test_refusals():
    tool = _tool()
    with pytest.raises(SystemExit, match="unknown run id"):
        tool.main(["no-such-run"])
    with pytest.raises(SystemExit, match="not a step time"):
        tool.main(["nemo2407-h100-llama3-8b-8"])


def test_command_line_is_parsed_by_argparse(capsys):
    tool = _tool()
    a = tool.parse_args(["--per-kernel-us", "11.1", ROW, "mlperf-v51-nvidia-gb200-llama31-8b-72"])
    assert a.ids == [ROW, "mlperf-v51-nvidia-gb200-llama31-8b-72"] and a.per_kernel_us == 11.1
    assert tool.parse_args([ROW, "--per-kernel-us", "2"]).per_kernel_us == 2.0  # the flag anywhere
    assert tool.parse_args([ROW]).per_kernel_us is None
    for bad in ([], [ROW, "--per-kernel-us", "x"], [ROW, "--per-kernel-us"]):  # bad input: usage, exit 2
        with pytest.raises(SystemExit) as e:
            tool.parse_args(bad)
        assert e.value.code == 2
    assert "usage: strong_scale_terms.py" in capsys.readouterr().err
