"""The per-step constant of the MLPerf v6.0 DeepSeek-V3 GB200 runs and the sizes of its candidates
(docs/training.md, "The GB200 constant, candidate by candidate")."""

import numpy as np
import pytest
from toolmod import load_tool

from hnplan.catalog.runs import training_runs
from hnplan.planning.training.collectives import collective_s
from hnplan.planning.validation import run_job

ROW = "mlperf-v60-nvidia-gb200-deepseek-v3-{}"


def _tool():
    return load_tool("scale_split")


def _split(line: str) -> tuple[float, float]:
    w, f = line.split("W/N = ")[1].split(" s, F = ")
    return float(w), float(f.split(" s")[0])


@pytest.mark.parametrize(
    ("small", "large", "steps", "ratio"),
    [
        # 512 / 2,048 GPUs at one global batch of 15,360 sequences: 4x the sequences per GPU; the
        # 512-GPU step of its fastest log (result_0, 30.834 s), the 2,048-GPU published median 8.893 s
        ("512", "2048", (30.834, 8.893), 4.0),
        # 4,096 / 8,192 GPUs at 16,384 sequences: 2x; the published medians 5.374 and 3.470 s
        ("4096", "8192", (5.374, 3.470), 2.0),
    ],
)
def test_gb200_steps_split_into_the_models_work_and_a_missing_constant(capsys, small, large, steps, ratio):
    tool = _tool()
    tool.main(ROW.format(small), ROW.format(large), steps=steps)
    given, modelled = capsys.readouterr().out.splitlines()
    t1, t2 = steps
    w_by_hand = (t1 - t2) / (ratio - 1.0)  # W / N2 = (T1 - T2) / (ratio - 1), F = T2 - W / N2
    w, f = _split(given)
    assert w == pytest.approx(w_by_hand, abs=0.002) and f == pytest.approx(t2 - w_by_hand, abs=0.002)
    # 7.314 s and 1.579 s; 1.904 s and 1.566 s: the constant is about 1.6 s at both ends of the range
    assert f == pytest.approx(1.57, abs=0.02)
    # the work of a micro-batch is modelled 4-5 % fast since the routed experts run the fused grouped MLP the configs
    # set (fused_grouped_mlp: 6.961 against 7.314 s, 1.827 against 1.904 s; within 4 % before it, docs/training.md)
    w_model, _ = _split(modelled)
    assert w_model == pytest.approx(w, rel=0.05) and w_model < w


def test_expert_gradient_reduce_scatter_crosses_racks_through_two_nics_by_hand():
    run = next(r for r in training_runs() if r.id == ROW.format("8192"))
    job = run_job(run)
    # DeepSeek-V3: 58 MoE layers of 256 routed experts, each 3 x 7,168 x 2,048 weights, over PP 4 x EP 32
    expert_params = 256 * 58 * 3 * 7168 * 2048 / (4 * 32)
    assert expert_params == pytest.approx(5.107e9, rel=1e-3)
    s = 2.0 * expert_params  # bf16 gradients [bytes]
    # the expert-DP group: TP 2 x DP 1,024 / (ETP 1 x EP 32) = 64 ranks at stride ETP x EP = 32, two in each
    # 64-GPU rack segment: its rings leave a rack through those two GPUs' 400G NICs,
    # 2 x 47 GB/s (the catalog's NDR per-NIC ring rate); a ring reduce-scatter moves (p - 1) / p of S
    t = float(collective_s(job, "reducescatter", np.array([s]), np.array([64]), np.array([32]))[0])
    by_hand = 63 / 64 * s / (2 * 47e9)
    assert by_hand == pytest.approx(0.107, abs=0.001)
    assert t == pytest.approx(by_hand, rel=0.02)  # the rest: the ring's latency over 32 racks
    # the same group on CoreWeave's GB300 800G ConnectX-8 RoCE (Spectrum-X): twice the line rate at RoCE's 0.92
    gb300 = next(r for r in training_runs() if r.id == "mlperf-v60-coreweave-gb300-deepseek-v3-8192")
    t300 = float(collective_s(run_job(gb300), "reducescatter", np.array([s]), np.array([64]), np.array([32]))[0])
    assert t300 == pytest.approx(63 / 64 * s / (2 * 92e9), rel=0.03)


def test_embedding_gradient_all_reduce_between_the_end_stages_by_hand():
    from hnplan.planning.training.dp_collectives import embedding_grad_allreduce_s
    from hnplan.planning.training.search import search_candidates

    run = next(r for r in training_runs() if r.id == ROW.format("8192"))
    job = run_job(run)
    plans = search_candidates(job, run.fixed)
    t = embedding_grad_allreduce_s(job, plans)
    assert len(t) == len(plans) and np.ptp(t) == 0.0  # one layout: TP 2, PP 4, DP 1,024
    # DeepSeek-V3's MTP module keeps the embedding on the last stage: its gradient, 129,280 x 7,168 / TP 2
    # elements in bf16 = 926.7 MB, all-reduced between the first and last stages (another rack): half each
    # way twice over one GB200's 400G NIC, 47 GB/s
    s = 129280 * 7168 / 2 * 2.0
    assert s == pytest.approx(926.7e6, rel=1e-4)
    assert t[0] == pytest.approx(s / 47e9, rel=0.02)  # 19.7 ms, the rest two point-to-point latencies
    # a model with its own output layer and no MTP (Llama 3.1 405B), or one pipeline stage: none
    llama = next(r for r in training_runs() if r.id == "mlperf-v60-azure-gb200-llama31-405b-8192")
    j2 = run_job(llama)
    assert not embedding_grad_allreduce_s(j2, search_candidates(j2, llama.fixed)).any()
    one_stage = plans.copy()
    one_stage["pp"] = 1
    assert not embedding_grad_allreduce_s(job, one_stage).any()
    # DualPipe keeps the embedding and the output head on one rank (arXiv:2412.19437 Sec. 2.2): none
    dual = next(r for r in training_runs() if r.id == "deepseek-v3-2048-dualpipe")
    j3 = run_job(dual)
    assert not embedding_grad_allreduce_s(j3, search_candidates(j3, dual.fixed)).any()


def test_the_tp_pairs_step_end_all_reduce_is_milliseconds_by_hand():
    """What TP 2 (GB200) adds once a step over TP 1 (GB300): the all-reduce over the TP pair of the gradients
    of the weights every TP rank holds whole (docs/training.md, "GB200 against GB300, setting by setting")."""
    run = next(r for r in training_runs() if r.id == ROW.format("8192"))
    job = run_job(run)
    # a DeepSeek-V3 MoE layer (HF config.json): MLA q down-projection 7,168 x 1,536, kv down-projection
    # 7,168 x (512 + 64), the router 256 x 7,168, the two RMSNorms (7,168) and the q / kv latent norms
    per_layer = 7168 * 1536 + 7168 * (512 + 64) + 256 * 7168 + 2 * 7168 + 1536 + 512
    assert per_layer == pytest.approx(16.99e6, rel=1e-3)
    s = 16 * per_layer * 2.0  # a 16-layer stage, bf16 gradients: 0.54 GB
    assert s == pytest.approx(0.544e9, rel=1e-3)
    t = float(collective_s(job, "allreduce", np.array([s]), np.array([2]), np.array([1]))[0])
    # two ranks: each sends and receives S / 2 twice, S in all, over NVLink 5 (900 GB/s a direction);
    # the catalog's achievable rate puts it a little above that floor, far below the 1.2 s missing
    assert s / 900e9 < t < 2.0 * s / 900e9
    assert t < 0.002


def test_the_releases_once_a_step_collectives_are_latency_and_under_a_millisecond():
    """What the 26.04 Megatron-Core / Megatron-Bridge release runs once a step beyond the graph replay
    (docs/training.md, "The release's once-a-step code, sized"), at 8,192 GB200s: the paged-stash runner's
    overflow check, the expert-bias update and a micro-batch's per-sequence auxiliary-loss reductions."""
    run = next(r for r in training_runs() if r.id == ROW.format("8192"))
    job = run_job(run)

    def t(n_bytes, size):  # an all-reduce over `size` consecutive ranks [s]
        return float(collective_s(job, "allreduce", np.array([float(n_bytes)]), np.array([size]), np.array([1]))[0])

    # PagedStashRunner.check_moe_overflow: three int32 flags (stash overflow, token budget, host spill)
    # all-reduced over every rank, then read with .item()
    flags = t(3 * 4, 8192)
    # get_updated_expert_bias: each MoE layer's tokens per expert (256, fp32) of a 16-layer stage, over the
    # TP x DP x CP group of the stage (TP 2 x DP 1,024 = 2,048 consecutive ranks with PP outermost)
    bias_bytes = 16 * 256 * 4
    assert bias_bytes == 16384
    bias = t(bias_bytes, 2 * 1024)
    # _apply_seq_aux_loss: a layer's tokens per expert over the TP pair, once per MoE layer and micro-batch
    aux = t(256 * 8, 2)
    # latency-bound: the bytes at one 400G NIC's 47 GB/s are under 0.4 us, each collective tens of us or more
    assert bias_bytes / 47e9 < 0.4e-6 and bias > 100 * bias_bytes / 47e9
    assert 1e-4 < flags < 3e-4 and 1e-4 < bias < 3e-4  # 0.18 and 0.15 ms
    assert aux < 2e-5  # 7.8 us over NVLink; 16 MoE layers a micro-batch: about 0.1 ms of its 0.119 s
    # together, with a micro-batch's auxiliary-loss reductions, under a millisecond: not the 1.2 s missing
    assert flags + bias + 16 * aux < 1e-3


def test_the_fill_path_bound_of_the_first_forward_gather_stalls_by_hand():
    """The parameter all-gathers of each model chunk start in its first forward's pre-hook, behind its
    first input; along the fill, 16 chunks (PP 4 x VP 4) stall in series at most (docs/training.md, "One
    mechanism of the captured graph"): an upper bound, not modelled."""
    from hnplan.planning.training.components import local_params
    from hnplan.planning.training.dp_buckets import param_gather_bytes
    from hnplan.planning.training.search import search_candidates
    from hnplan.planning.validation import predict_run

    run = next(r for r in training_runs() if r.id == ROW.format("8192"))
    job = run_job(run)
    dense, expert = (float(np.asarray(x)[0]) for x in local_params(job, search_candidates(job, run.fixed)))
    assert dense == pytest.approx(2.14e9, rel=0.01) and expert == pytest.approx(5.107e9, rel=1e-3)
    g_dense, g_expert = param_gather_bytes(job)  # MXFP8 weights gathered in bf16
    assert g_dense == g_expert == 2.0
    bucket = 134217728  # conf/deepseekv3_671b.yaml bucket_size

    def gather(n, size, stride, nbytes):  # all buckets of one stage over its group [s]
        nb = np.ceil(n / bucket)
        one = collective_s(job, "allgather", np.array([n / nb * nbytes]), np.array([size]), np.array([stride]))
        return nb * float(one[0])

    t_dense = gather(dense, 1024, 2, g_dense)  # DP 1,024 at stride TP 2
    t_expert = gather(expert, 64, 32, g_expert)  # expert-DP 64 at stride ETP x EP 32, 39 buckets
    assert np.ceil(expert / bucket) == 39
    assert t_dense == pytest.approx(0.043, abs=0.003) and t_expert == pytest.approx(0.124, abs=0.005)
    t = t_dense + t_expert
    t_fwd = float(predict_run(run).t_compute_s) / 16 / 3  # a forward: a third of a micro-batch's 0.111 s
    stall = (t - t_fwd) / 4  # a chunk's gathers beyond its forward
    assert stall == pytest.approx(0.033, abs=0.002)
    counted = t - t_fwd  # hnplan: one stage's gathers beyond one forward (above its last bucket)
    assert 16 * stall - counted == pytest.approx(0.40, abs=0.02)  # at most a third of the 1.2 s missing
