"""The design-comparison verdict tells the supernode fabric's gain apart from the newer chip's (issue 17),
on hand-made rows whose ratios are derived by hand below."""

import pandas as pd
import pytest

from hnplan.planning.compare import fabric_and_chip, trust_notes, verdict


def _rows():
    # days and peaks chosen so the ratios are exact: 44/20 = 2.2x for the fabric pair, 2,500/2,000 = 1.25x peak
    return pd.DataFrame(
        [
            dict(
                system="rack",
                kind="supernode",
                peak_tflops=2500.0,
                days=20.0,
                mfu=0.5,
                capex_musd=300.0,
                run_musd=10.0,
                usd_per_million_tokens=1.0,
                status="ok",
            ),
            dict(
                system="new-server",
                kind="server-cluster",
                peak_tflops=2400.0,
                days=44.0,
                mfu=0.4,
                capex_musd=250.0,
                run_musd=12.0,
                usd_per_million_tokens=1.2,
                status="ok",
            ),
            dict(
                system="old-server",
                kind="server-cluster",
                peak_tflops=1000.0,
                days=110.0,
                mfu=0.4,
                capex_musd=200.0,
                run_musd=20.0,
                usd_per_million_tokens=2.0,
                status="ok",
            ),
        ]
    )


def test_fabric_and_chip_are_told_apart():
    text = fabric_and_chip(_rows())
    fabric, chip = text.split("\n\n")
    # the rack against the server of the same generation (2,400 within 1.25x of 2,500), not the old one
    assert "**rack** trains 2.20x as fast as **new-server**" in fabric
    # 2,500 / 2,400 = 1.04x of the speed-up is the rack's GPU peak; 2.2 / 1.0417 = 2.11x the fabric's
    assert "its GPU peaks 1.04x as high" in fabric and "account for about 2.11x" in fabric
    assert "$10M on rack against $12M on new-server" in fabric
    # the chip: the two server clusters, 110 / 44 = 2.5x faster with a 2.4x peak
    assert "**new-server** trains 2.50x as fast as **old-server**" in chip and "2.40x dense peak" in chip


def test_no_pair_no_claim():
    df = _rows().iloc[[0, 2]]  # a rack and a server two generations apart: neither comparison is clean
    assert fabric_and_chip(df) == ""
    assert "**rack** trains fastest" in verdict(df) and "costs least to buy ($200M capex)" in verdict(df)


def test_verdict_names_the_cheapest_run():
    assert (
        "Per training run, at each design's TCO per GPU-hour, **rack** costs least ($10M, $1.00 per million"
        in verdict(_rows())
    )


def _designs(*pairs):
    return pd.DataFrame([dict(system=s, accelerator=a, status="ok") for s, a in pairs])


def test_trust_notes_name_the_unvalidated_design_the_clock_and_the_moe_host_gap():
    # DeepSeek-V3 on the H800 cluster it trained on, a GB200 NVL72 and a CloudMatrix 384: published runs on
    # H800 (DeepSeek-V3 report, Pai-Megatron-Patch) and GB200 (MLPerf, Megatron-Bridge) are in the validation
    # set, none on Ascend 910C; the sustained clocks are the catalog's (H800: hot MAMF 794.5 / 828.6 = 0.959;
    # GB200: the B200's 1,237 / 1,450 = 0.853); the default stack captures no MoE kernel in a CUDA graph
    df = _designs(("hgx-h800-ib", "h800-sxm"), ("gb200-nvl72", "gb200"), ("cloudmatrix-384", "ascend-910c"))
    text = trust_notes(df, "deepseek-v3")
    assert "No published training run on ascend-910c is in the validation set: cloudmatrix-384 is not validated" in (
        text
    )
    assert "0.959 on h800-sxm; 0.853 on gb200." in text
    assert "on h800-sxm" in text.split("validation set: ")[1] and "ascend-910c" not in text.split("No published")[0]
    assert "deepseek-v3 is a mixture of experts" in text and "one value fitted to those runs" in text
    # the fitted rows' remaining errors at the fit over 30 rows (README validation table: pai658 H800 Qwen3-235B-A22B
    # -19.4 % since the stages split as the recipes split them, the Megatron-LM GB200 Qwen3-30B-A3B MXFP8 recipe +32.7 % since MXFP8 GEMMs run at their measured rate; bf16 Hopper Qwen3-30B-A3B +6.8..+12.7 %)
    assert "between 19 % slower and 33 % faster than measured" in text and "runs 7-13 % faster" in text
    assert "(moe_host_us_per_kernel, 37.5 us a kernel)" in text  # the catalog's value, not a copy of it
    # a dense model on validated designs: no MoE sentence, no unvalidated design
    designs = _designs(("gb200-nvl72", "gb200"), ("hgx-b200-ib-xdr", "b200"), ("hgx-h100-ib-ndr", "h100-sxm"))
    dense = trust_notes(designs, "llama3.1-405b")
    assert "mixture of experts" not in dense and "not validated" not in dense
    assert "0.853 on gb200 and b200; 0.959 on h100-sxm." in dense
    # the price each design is costed at, from data/prices.yaml: a third-party estimate of the NVL72 rack
    # (price-gb200-nvl72-2025), a DGX B200 quote (price-dgx-b200-2025), a 2023 H100 server price (price-hgx-h100-semianalysis-2023)
    assert (
        "rest on one dated system price per design (`data/prices.yaml`, each with its source and kind): "
        "gb200-nvl72 $3.1M per unit (72-GPU rack) ($43.1k a GPU), as of 2025-06-01: GB200 NVL72 rack price "
        "(third-party estimate); hgx-b200-ib-xdr $515k per unit (8-GPU DGX B200 system) ($64.4k a GPU), as of "
        "2025-03-01: DGX B200 price (one quoted price, secondary); hgx-h100-ib-ndr $270k per unit"
    ) in dense
    # prices of unlike kinds are said to rank the designs only as firmly as the least certain
    assert "rank the designs only as firmly as the least certain of them" in dense
    # with its plan's GPU count and MFU, a design is set beside the nearest published run of the model on its
    # accelerator: Llama 3 on 16,384 H100 (arXiv:2407.21783 Table 4), 400 TFLOP/s / 989.4 bf16 peak = 40.4% MFU
    planned = designs.assign(gpus=16384, mfu=0.501, dtype="bf16")
    assert (
        "The nearest published run of llama3.1-405b on h100-sxm, llama3-405b-16384 (16,384 GPUs of "
        "hgx-h100-roce-400g, bf16), measured 400 model TFLOP/s per GPU, 40.4% MFU, against 50.1% for "
        "hgx-h100-ib-ndr's plan here"
    ) in trust_notes(planned, "llama3.1-405b")
    assert "nearest published run" not in dense  # no GPU count or MFU given
    # DeepSeek-V3 on 2,048 H800 in FP8 (DeepSeek-V3 report): 1,543 tokens/s per GPU x 281.2 GFLOP per token
    # (PaLM's 6N + attention core at sequence 4,096: the active experts' and MLA matmuls, the LM head) over the
    # H800's 1,978.9 TFLOP/s FP8 peak = 21.9%; there is no bf16 run of it on H800
    moe = _designs(("hgx-h800-ib", "h800-sxm")).assign(gpus=2048, mfu=0.163)
    assert "deepseek-v3-2048 (2,048 GPUs of hgx-h800-ib, fp8), measured 1,543 tokens/s per GPU, 21.9% MFU" in (
        trust_notes(moe.assign(dtype="fp8"), "deepseek-v3")
    )
    assert "nearest published run" not in trust_notes(moe.assign(dtype="bf16"), "deepseek-v3")
    # no design with a plan: nothing to qualify
    assert (
        trust_notes(pd.DataFrame([dict(system="x", accelerator="gb200", status="no plan: ...")]), "llama3.1-8b") == ""
    )


def test_moe_dispatch_gap_is_said_from_the_validation_runs(cat):
    """DeepSeek-V3 on 2,048 H800 (arXiv:2412.19437; 1,543 tokens/s per GPU from 2.664M GPU-hours for 14.8T
    tokens) is one job in the validation set predicted with two MoE dispatches: megatron-core's exposed NCCL
    all-to-all (about -58 %, beyond the 15 % tolerance) and DualPipe's overlapped one (about -3 %). A MoE plan on
    the exposed dispatch says so and names the stacks whose own dispatch is the overlapped one; a plan with that
    dispatch, a dispatch no pair of runs speaks about, or a dense model says nothing."""
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.trust import moe_dispatch_sentence, speed_errors

    runs = {r.id: r for r in training_runs()}
    errs = speed_errors([runs["deepseek-v3-2048"], runs["deepseek-v3-2048-dualpipe"]], cat)
    assert errs["deepseek-v3-2048"] < -0.15 and abs(errs["deepseek-v3-2048-dualpipe"]) <= 0.15  # the pair
    for stack in ("megatron-core", None):  # the planner's defaults dispatch as megatron-core does
        text = moe_dispatch_sentence("deepseek-v3", stack, cat)
        assert f"deepseek-v3-2048 (2,048 GPUs of hgx-h800-ib) is predicted {_pct(errs['deepseek-v3-2048'])}" in text
        assert "--stack deepseek-v3-dualpipe (" in text and "--stack megatron-core-ep-overlap (" in text
        assert "--stack megatron-core " not in text and "megatron-bridge" not in text  # other dispatches
    assert moe_dispatch_sentence("qwen3-30b-a3b", "megatron-core", cat).startswith("qwen3-30b-a3b is a mixture")
    assert moe_dispatch_sentence("deepseek-v3", "deepseek-v3-dualpipe", cat) == ""
    assert moe_dispatch_sentence("deepseek-v3", "megatron-core-ep-overlap", cat) == ""
    assert moe_dispatch_sentence("deepseek-v3", "megatron-bridge-2511", cat) == ""  # flex, not overlapped: no pair
    assert moe_dispatch_sentence("llama3.1-405b", "megatron-core", cat) == ""
    # the design comparison's trust text carries it for a MoE model, not for a dense one
    df = _designs(("hgx-h100-ib-ndr", "h100-sxm"))
    assert "--stack deepseek-v3-dualpipe" in trust_notes(df, "deepseek-v3")
    assert "known validation gap" not in trust_notes(df, "deepseek-v3", stack="deepseek-v3-dualpipe")
    assert "known validation gap" not in trust_notes(df, "llama3.1-405b")


def _pct(x):
    return f"{round(100 * x):+d} %"


def test_the_fabric_is_compared_per_gpu_where_the_gpu_counts_differ():
    # whole units bought: the rack trains on 1,024 GPUs (64 of each of 16 72-GPU racks), the servers on 1,152;
    # a days ratio alone would credit the fabric with the servers' extra 128 GPUs' work. By hand: 45 / 20 = 2.25x
    # as fast; per GPU (45 x 1,152) / (20 x 1,024) = 2.53125x; over the 2,500 / 2,400 = 1.0417x peak the fabric
    # and rest of the rack account for 2.53125 x 0.96 = 2.43x per GPU (not 2.25 / 1.0417 = 2.16x)
    df = _rows().assign(gpus=[1024, 1152, 1152], days=[20.0, 45.0, 110.0])
    fabric, chip = fabric_and_chip(df).split("\n\n")
    assert "**rack** trains 2.25x as fast as **new-server**" in fabric
    assert "(20.0 against 45.0 days, on 1,024 GPUs against 1,152: 2.53x the speed per GPU)" in fabric
    assert "so per GPU the fabric and the rest of the rack account for about 2.43x" in fabric
    # both servers train on 1,152 GPUs: no per-GPU clause; 110 / 45 = 2.44x
    assert "**new-server** trains 2.44x as fast as **old-server** (45.0 against 110.0 days) with a 2.40x" in chip
    assert "**rack** trains fastest (20.0 days at 50% MFU on 1,024 GPUs)" in verdict(df)
    assert "costs least to buy ($200M capex)" in verdict(df.assign(gpus_bought=1152))  # the same GPUs bought
    # the designs buy different counts (whole units): the cheapest says for how many GPUs
    assert "costs least to buy ($200M capex for 1,024 GPUs)" in verdict(df.assign(gpus_bought=[1152, 1152, 1024]))
    # equal counts: the days ratio is the per-GPU ratio and the sentence is as before
    same = fabric_and_chip(_rows().assign(gpus=1152))
    assert (
        "(20.0 against 44.0 days);" in same and "so the fabric and the rest of the rack account for about 2.11x" in same
    )


def test_one_design_is_described_not_ranked():
    # old-server alone: 110 days at 40% MFU, $200M capex, $20M per run, $2.00 per million tokens (the rows above)
    one = verdict(_rows().iloc[[2]])
    assert one == (
        "**old-server** is the one design compared, so there is nothing to rank: it trains in 110.0 days at 40% MFU, "
        "costs $200M to buy and $20M per training run at its TCO per GPU-hour ($2.00 per million tokens)."
    )
    # thousands of days are written as the rest of the CLI writes them (it said "5919.1 days")
    assert "it trains in 5,919.1 days at 40% MFU" in verdict(_rows().iloc[[2]].assign(days=5919.1))
    failed = _rows().iloc[[0, 2]].assign(status=["no plan: does not fit", "ok"])
    assert verdict(failed).startswith("**old-server** is the only one of 2 designs with a plan, so there is nothing")
    assert "fastest" not in one and "least" not in verdict(failed)


def test_compare_with_one_system_says_so():
    import json

    from typer.testing import CliRunner

    from hnplan.cli import app

    argv = ["compare", "--model", "llama3.1-8b", "--gpus", "8", "--tokens", "1e11", "--systems", "hgx-h100-ib-ndr"]
    res = CliRunner().invoke(app, [*argv, "--no-trust", "--json"])
    assert res.exit_code == 0, res.output
    said = json.loads(res.stdout)["verdict"]
    assert said.startswith("hgx-h100-ib-ndr is the one design compared, so there is nothing to rank")
    assert "fastest" not in said and "costs least" not in said


def test_designs_that_tie_are_named_together_not_fastest_and_slowest():
    # a copy of a catalog system (its own file, no price) trains in the same days as the catalog's: the verdict
    # named the copy fastest and, the same row, "the slowest, ..., takes 1.00x as long"
    from hnplan.planning.compare_verdict import verdict

    row = dict(
        system="hgx-h100-ib-ndr", kind="server-cluster", status="ok", days=16.6, mfu=0.64, gpus=64, gpus_bought=64,
        capex_musd=3.26, run_musd=0.0376, usd_per_million_tokens=0.0376, peak_tflops=989.4,
    )  # fmt: skip
    copy = {**row, "system": "my-h100", "capex_musd": None, "run_musd": None, "usd_per_million_tokens": None}
    text = verdict([copy, row])
    assert text.startswith("**my-h100** and **hgx-h100-ib-ndr** train fastest (16.6 days at 64% MFU)")
    assert "slowest" not in text
    slower = {**row, "system": "other", "days": 16.6 * 1.01}  # 1 % slower: ranked as before
    text = verdict([row, slower])
    assert text.startswith("**hgx-h100-ib-ndr** trains fastest") and "The slowest, other, takes 1.01x as long." in text


def test_designs_that_cost_the_same_are_named_together():
    # a copy of a catalog system priced as it (price_item) costs as much to buy and per run: the verdict named the
    # copy and the catalog's together fastest, but the copy alone as the cheapest to buy and per run
    from hnplan.planning.compare_verdict import verdict

    row = dict(
        system="hgx-h100-ib-ndr", kind="server-cluster", status="ok", days=16.6, mfu=0.64, gpus=64, gpus_bought=64,
        capex_musd=3.26, run_musd=0.0376, usd_per_million_tokens=0.0376, peak_tflops=989.4,
    )  # fmt: skip
    text = verdict([{**row, "system": "my-h100"}, row])
    assert text.startswith(
        "**my-h100** and **hgx-h100-ib-ndr** train fastest (16.6 days at 64% MFU); **my-h100** and "
        "**hgx-h100-ib-ndr** cost least to buy ($3.26M capex). Per training run, at each design's TCO per GPU-hour, "
        "**my-h100** and **hgx-h100-ib-ndr** cost least ($37.6k, $0.04 per million tokens)."
    )
    dearer = {**row, "system": "other", "capex_musd": 3.26 * 1.01, "run_musd": 0.0376 * 1.01}  # 1 % dearer
    text = verdict([row, dearer])
    assert "; **hgx-h100-ib-ndr** costs least to buy" in text and "GPU-hour, **hgx-h100-ib-ndr** costs least" in text


def test_moe_host_note_describes_the_stack_planned_with():
    """The MoE host-work note names the stack the designs were planned with and what it leaves out of CUDA
    graphs: megatron-core (the default) and the planner's bare defaults (``stack=None``) capture no MoE scope; megatron-bridge-2511-mxfp8 captures
    the router and dispatch preprocess (``cuda_graph_scope: [moe_router, moe_preprocess]``, the Megatron-Bridge
    25.11 DeepSeek-V3 GB200 recipe) but not the routed experts, and on B200 nothing (its ``choices_by_accelerator``);
    deepseek-v3-dualpipe charges no MoE host work (``moe_host_us_per_kernel: 0``)."""
    df = _designs(("gb200-nvl72", "gb200"), ("hgx-b200-ib-xdr", "b200"))
    default = trust_notes(df, "deepseek-v3")  # hnplan.defaults.DEFAULT_STACK, as the designs are planned
    assert default == trust_notes(df, "deepseek-v3", stack="megatron-core")
    assert (
        "deepseek-v3 is a mixture of experts and stack megatron-core launches all its MoE kernels from "
        "the host, outside CUDA graphs"
    ) in default
    assert "deepseek-v3 is a mixture of experts planned on megatron-core, whose MoE dispatch" in default
    bare = trust_notes(df, "deepseek-v3", stack=None)  # no stack entry: StackChoices' defaults
    assert (
        "deepseek-v3 is a mixture of experts and the planner's default stack launches all its MoE kernels from "
        "the host, outside CUDA graphs"
    ) in bare
    assert "deepseek-v3 is a mixture of experts planned on the planner's defaults, whose MoE dispatch" in bare
    bridge = trust_notes(df, "deepseek-v3", stack="megatron-bridge-2511-mxfp8")
    assert "default stack" not in bridge and "planner's defaults" not in bridge
    assert (
        "deepseek-v3 is a mixture of experts and stack megatron-bridge-2511-mxfp8 launches the routed experts "
        "(moe) on gb200; all its MoE kernels on b200 from the host, outside CUDA graphs"
    ) in bridge
    assert "(moe_host_us_per_kernel, 37.5 us a kernel)" in bridge
    assert "launches all its MoE kernels from the host" in trust_notes(df, "deepseek-v3", stack="megatron-core")
    assert "outside CUDA graphs" not in trust_notes(df, "deepseek-v3", stack="deepseek-v3-dualpipe")
    # the dispatch gap is said of the stack used: megatron-core's exposed all-to-all on H800, by its id
    h800 = _designs(("hgx-h800-ib", "h800-sxm"))
    assert "planned on megatron-core, whose MoE dispatch" in trust_notes(h800, "deepseek-v3", stack="megatron-core")


def test_trust_notes_look_up_a_design_of_the_user_s_file_by_its_path(tmp_path):
    """A sizing table (system and status, no accelerator) of a design read from the user's YAML file: its id
    is not the catalog's, so the notes take the systems as given (before: 'unknown system id', and the
    hardware_sizing notebook failed). Its price is its own quote, $290k per 8-GPU server, and its chip the
    copied system's, h100-sxm (48 published runs)."""
    from hnplan.catalog import load_catalog

    text = (load_catalog().root / "systems" / "hgx-h100-ib-ndr.yaml").read_text()
    path = tmp_path / "my-h100.yaml"
    path.write_text(text.replace("id: hgx-h100-ib-ndr", "id: my-h100", 1) + "unit_price_usd: 290000\n")
    df = pd.DataFrame({"system": ["gb200-nvl72", "my-h100"], "status": "ok"})
    notes = trust_notes(df, "llama3.1-70b", systems=["gb200-nvl72", str(path)])
    assert "0.853 on gb200; 0.959 on h100-sxm." in notes
    assert "gb200-nvl72 $3.1M per unit (72-GPU rack) ($43.1k a GPU), as of 2025-06-01: GB200 NVL72 rack price" in notes
    assert "; my-h100 $290k per unit" in notes


def test_the_heading_says_the_gpus_each_design_was_planned_on():
    # gpus: 7 headed the report "on 7 GPUs per design" while GB200 was bought as a whole 72-GPU NVL72 rack and
    # H100 as one 8-GPU server: the heading takes the trained and bought counts from the planner's table
    from hnplan.planning.compare import compare_training_designs, heading

    df = compare_training_designs("llama3.1-8b", ["gb200-nvl72", "hgx-h100-ib-ndr"], 7, 1e11, 8192, 64, "bf16")
    assert list(df["gpus_bought"]) == [72, 8]  # ceil(7 / 72) racks of 72, ceil(7 / 8) servers of 8
    assert heading(df, "llama3.1-8b", 1e11, 7) == (
        "## llama3.1-8b: 100B tokens, 7 GPUs asked per design; planned (GPUs trained on, of those bought as "
        "whole units): gb200-nvl72 7 of 72, hgx-h100-ib-ndr 7 of 8"
    )
    df = compare_training_designs("llama3.1-8b", ["gb200-nvl72", "hgx-h100-ib-ndr"], 144, 1e11, 8192, 64, "bf16")
    # 144 GPUs: 64 sequences per step divide over 128 of them (DP 128 at TP 1), on two racks or 18 servers
    assert heading(df, "llama3.1-8b", 1e11, 144).endswith("units): gb200-nvl72 128 of 144, hgx-h100-ib-ndr 128 of 144")
    assert (
        heading(df.assign(gpus=144), "llama3.1-8b", 1e11, 144) == "## llama3.1-8b: 100B tokens on 144 GPUs per design"
    )


def test_the_verdict_says_when_the_designs_train_on_different_counts():
    """100 GPUs asked at 144 sequences a step: GB200 NVL72 trains on all 144 GPUs of two racks, HGX H100 on 96 of 13
    servers' 104 (the batch divides neither 100 nor 104); the verdict names both counts, so that a reader does not
    take the days for a chip-for-chip race."""
    from hnplan.planning.compare import compare_design_rows

    rows = compare_design_rows("llama3.1-8b", ["gb200-nvl72", "hgx-h100-ib-ndr"], 100, 1e11, 8192, 144)
    assert [(r["gpus"], r["gpus_bought"]) for r in rows] == [(144, 144), (96, 104)]
    assert "The designs train on different GPU counts (gb200-nvl72 144, hgx-h100-ib-ndr 96" in verdict(rows)
    same = compare_design_rows("llama3.1-8b", ["gb200-nvl72", "hgx-h100-ib-ndr"], 72, 1e11, 8192, 144)
    assert "different GPU counts" not in verdict(same)


def test_the_fabrics_share_is_split_into_mfu_and_goodput():
    """The factor left to the fabric and the rest of the rack (speed over the peaks' ratio) is the MFU ratio of the
    two designs' best plans times their goodput ratio; the verdict gives both, so that 0.93x does not read as the
    NVL72 fabric slowing training (Llama 3.1 405B on 16,384 GPUs: 0.96x in MFU, 0.97x in goodput)."""
    from hnplan.planning.compare import compare_design_rows

    rows = compare_design_rows("llama3.1-405b", ["gb200-nvl72", "hgx-b200-ib-xdr"], 16384, 15e12, 8192, 2048)
    sn, sv = rows
    text = fabric_and_chip(rows)
    mfu, good = sn["mfu"] / sv["mfu"], sn["goodput"] / sv["goodput"]
    assert f"({mfu:.2f}x in MFU, the plans each design finds, and {good:.2f}x in goodput" in text
    rest = (sv["days"] / sn["days"]) * sv["gpus"] / sn["gpus"] / (sn["peak_tflops"] / sv["peak_tflops"])
    assert rest == pytest.approx(mfu * good, rel=0.02)  # the two parts make the whole (the same tokens)
