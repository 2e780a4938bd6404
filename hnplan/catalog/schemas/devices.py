"""Hardware devices: accelerators, interconnects and switches, and the bounds of every hardware figure
(systems and storage: :mod:`hnplan.catalog.schemas.hardware`, which re-exports these names)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from hnplan.catalog.schemas.base import Dtype, Entry, Fraction, NonNegative, PosInt, Positive
from hnplan.catalog.schemas.plausibility import hbm_visible_problem, memory_bandwidth_problem

# -- upper bounds of hardware figures ----------------------------------------------------------------
# Generous bounds, one to two orders of magnitude above any shipping part (wafer-scale included), so a
# typo (``nic_gbps: 1e300``, ``nics_per_node: 1e11``) is refused with the field named instead of
# overflowing the arithmetic or producing a plan of astronomical numbers.
MAX_TFLOPS = 1e7  # B300: 15,000 dense FP4; Cerebras WSE-3 wafer: 125 PFLOP/s (sparse) [TFLOP/s]
MAX_HBM_GB = 1e6  # B300: 288 GB per package [GB]
MAX_HBM_TBPS = 1e5  # B200: 8 TB/s; WSE-3 on-wafer SRAM: 21 PB/s [TB/s]
MAX_LINK_GBPS = 1e5  # NVLink 5: 900 GB/s per direction per GPU; ConnectX-8: 800 Gb/s per NIC [GB/s or Gb/s]
MAX_POWER_W = 1e5  # B300: 1,400 W; WSE-3 system: about 23 kW [W]
MAX_GPUS_PER_BLOCK = 2**16  # largest scale-up domains: 384 (CloudMatrix 384), 576 (NVL576) accelerators
MAX_NICS_PER_NODE = 1024  # 8 to 18 scale-out NICs per node today

MAX_UNIT_POWER_KW = 1e4  # CloudMatrix 384 supernode: 559 kW; an NVL72 rack: 132 kW [kW]
MAX_HOST_MEMORY_GIB = 1e6  # 2 TB servers today; a 32-socket host holds about 48 TiB [GiB]
MAX_CAPACITY_TB = 1e6  # an exabyte of memory pool or NVMe [TB]

# -- lower bounds of hardware figures ----------------------------------------------------------------
# Floors far below any part an AI cluster is built from, where a smaller value is surely a unit slip
# (``nic_gbps: 0.4`` meaning 400 Gb/s, ``hbm_gb: 0.08`` meaning 80 GB, ``tdp_w: 0.7`` meaning 700 W) or a
# typo (``nic_gbps: 1e-300``, which plans every collective at 0 bytes/s and every step at 0 tokens/s).
MIN_TFLOPS = 1.0  # slowest peak in the catalog: A100 FP32 (non-tensor), 19.5 TFLOP/s [TFLOP/s]
MIN_HBM_GB = 1.0  # smallest data-centre accelerator memory: 16 GB (V100, T4) [GB]
MIN_HBM_TBPS = 0.01  # 10 GB/s, below one DDR4-3200 channel (25.6 GB/s, JEDEC JESD79-4); T4 GDDR6: 0.32 TB/s [TB/s]
MIN_LINK_GBPS = 1.0  # 1 GbE, the slowest data-centre Ethernet; one PCIe 3.0 lane: 0.985 GB/s [Gb/s or GB/s]
MIN_POWER_W = 10.0  # lowest-power data-centre accelerator: NVIDIA L4, 72 W [W]
MIN_UNIT_POWER_KW = 0.1  # one single-accelerator server draws several hundred watts [kW]
MIN_CAPACITY_TB = 1e-3  # 1 GB [TB]
MIN_STORAGE_GBPS = 1e-3  # 1 MB/s; cloud file systems provision from 0.05 GB/s per TiB (FSx Lustre) [GB/s]

Tflops = Annotated[float, Field(ge=MIN_TFLOPS, le=MAX_TFLOPS)]
LinkRate = Annotated[float, Field(ge=MIN_LINK_GBPS, le=MAX_LINK_GBPS)]
StorageRate = Annotated[float, Field(ge=MIN_STORAGE_GBPS, le=MAX_LINK_GBPS)]
BlockGpus = Annotated[int, Field(gt=0, le=MAX_GPUS_PER_BLOCK)]


class Accelerator(Entry):
    """One accelerator (GPU or NPU package) as the planner sees it."""

    vendor: str = Field(description="manufacturer")
    dense_tflops: dict[Dtype, Tflops] = Field(
        description="dense (not 2:4-sparse) peak [TFLOP/s, 1e12] per dtype; must include bf16"
    )
    hbm_gb: Annotated[float, Field(ge=MIN_HBM_GB, le=MAX_HBM_GB)] = Field(
        description="HBM capacity [GB, 1e9 bytes] as the datasheet states it"
    )
    hbm_bw_TBps: Annotated[float, Field(ge=MIN_HBM_TBPS, le=MAX_HBM_TBPS)] = Field(
        description="HBM bandwidth [TB/s, 1e12 bytes/s]"
    )
    hbm_visible_gib: Annotated[float, Field(ge=MIN_HBM_GB, le=MAX_HBM_GB)] | None = Field(
        default=None,
        description="device memory the driver reports to programs (torch.cuda.mem_get_info total "
        "or nvidia-smi memory.total) [GiB, 2**30 bytes]; when absent the memory model reads hbm_gb as GiB less "
        "the driver reservation measured on H100 (hnplan.memory.breakdown.HBM_DRIVER_RESERVE_FRACTION)",
    )
    scaleup_bw_GBps_per_dir: LinkRate = Field(
        description="scale-up (NVLink / xGMI / UB) bandwidth of one accelerator, all links, one direction [GB/s]"
    )
    nvlink_links: Annotated[int, Field(ge=1, le=72)] | None = Field(
        default=None,
        description="NVLink links of one accelerator; NCCL opens 2 send/recv channels a link to an NVLink peer, "
        "so the all-to-all's buffers scale with it (hnplan.memory.training.nccl_alltoall_scale); None: as many "
        "channels as the H100 reading of memory.yaml",
    )
    tdp_w: Annotated[float, Field(ge=MIN_POWER_W, le=MAX_POWER_W)] = Field(
        description="thermal design power of the accelerator [W]"
    )
    idle_w: Annotated[float, Field(gt=0.0, le=MAX_POWER_W)] | None = Field(default=None, description="idle power [W]")
    compute_units: PosInt | None = Field(
        default=None, description="streaming multiprocessors / AI cores, for wave quantisation"
    )
    matmul_efficiency: dict[Dtype, Fraction] = Field(
        description="achievable fraction of the dense peak on large GEMMs, per dtype (calibration)"
    )
    hbm_efficiency: Fraction = Field(
        description="achievable fraction of HBM bandwidth for streaming kernels (calibration)"
    )
    gemm_tile_mnk: tuple[PosInt, PosInt, PosInt] | None = Field(
        default=None,
        description="GEMM output tile (M, N) of one SM / core and its K step [elements], "
        "for tile and wave quantisation; none: no quantisation term",
    )
    kernel_overhead_us: NonNegative | None = Field(
        default=None, description="fixed time added to every kernel (launch, ramp-up, tail) [us] (calibration)"
    )
    # GEMM efficiency law (hnplan.compute.gemm, docs/compute.md); every field optional: absent = term off
    gemm_efficiency: dict[Dtype, Fraction] | None = Field(
        default=None,
        description="large-shape ceiling of the GEMM law as a fraction of the dense peak, per dtype "
        "(fitted or carried; absent: matmul_efficiency) (calibration)",
    )
    gemm_k_overhead: NonNegative | None = Field(
        default=None,
        description="prologue + epilogue of one output tile, in K elements of main-loop time [elements] (calibration)",
    )
    gemm_overlap_exponent: Annotated[float, Field(ge=1.0)] | None = Field(
        default=None,
        description="p of the smooth roofline (t_c^p + t_m^p)^(1/p) of a GEMM [-]; absent: max(t_c, t_m) (calibration)",
    )
    gemm_row_granularity: PosInt | None = Field(
        default=None,
        description="rows a GEMM computes below one tile height (swap-AB / small-M kernels pad M to a "
        "multiple of it) [elements]; absent: a full tile",
    )
    gemm_splitk_min_k: PosInt | None = Field(
        default=None, description="smallest K slice a split-K GEMM uses [elements]; absent: the tile's K step"
    )
    gemm_splitk_us: NonNegative | None = Field(
        default=None, description="extra time of a split-K GEMM (the reduction of the partial tiles) [us] (calibration)"
    )
    gemm_wave_weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        default=None,
        description="weight of the last partial wave of work units over the SMs [-]: 1 a full wave "
        "(no tail balancing), 0 balanced (stream-K); absent: 1 (calibration)",
    )
    gemm_output_exposed: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        default=None,
        description="share of a GEMM's output write that is not hidden behind its K loop [-]: 1 when every "
        "tile writes its output after its main loop, 0 when the write overlaps the MMAs; absent: 0 (calibration)",
    )
    grouped_gemm_overlap_exponent: Annotated[float, Field(ge=1.0)] | None = Field(
        default=None,
        description="p of the smooth roofline of PyTorch's SM90 CUTLASS grouped GEMM (torch._grouped_mm, "
        "hnplan.compute.grouped_gemm) [-]; absent: gemm_overlap_exponent (calibration)",
    )
    host_dispatch_us: NonNegative | None = Field(
        default=None,
        description="host time per operator call from an eager framework; back-to-back calls run no "
        "faster [us]; used for eager timings only (hnplan gemm --launch eager), never by the planners (calibration)",
    )

    sustained_compute_fraction: Fraction | None = Field(
        default=None,
        description="throughput of compute-bound kernels at the SM clock the board's power limit sustains "
        "through a training step, over their throughput in the short (boost-clock) runs the GEMM and attention "
        "calibrations were measured in [-]; HBM bandwidth unchanged; absent: 1 (hnplan.compute.clocks)",
    )

    memory_kernel_efficiency: (
        dict[
            Literal["norm", "norm_eager", "activation", "residual", "cross_entropy", "fp8_cast", "amax", "optimizer"],
            Fraction,
        ]
        | None
    ) = Field(
        default=None,
        description="bandwidth of memory-bound kernel classes as a fraction of the streaming copy "
        "(HBM x hbm_efficiency), on their minimum bytes; absent class: 1 (calibration)",
    )
    mxfp8_gemm_ratio: Fraction | None = Field(
        default=None,
        description="rate of an MXFP8 GEMM (E8M0 scale per 32 elements, Blackwell block-scaled MMA) over a per-tensor "
        "FP8 GEMM of the same shape and library on this chip [-]; the fp8 ceiling of a training job whose recipe is "
        "mxfp8 is scaled by it (hnplan.compute.fp8_recipes.mxfp8_gemm_accelerator); absent: 1 (calibration)",
    )
    fp8_tn_only: bool | None = Field(
        default=None,
        description="per-tensor fp8 GEMMs take only the TN layout, so the weight- and data-gradient GEMMs need "
        "transposed fp8 copies (Hopper); false: any layout (Blackwell); absent: true",
    )
    # attention law (hnplan.compute.operators._times, docs/compute.md): absent = the GEMM ceiling, no tail terms
    attention_efficiency: dict[Literal["fwd", "bwd"], Fraction] | None = Field(
        default=None,
        description="ceiling of the fused attention kernel per pass as a fraction of the bf16 dense peak (calibration)",
    )
    attention_tile_q: PosInt | None = Field(
        default=None, description="query rows of one attention work unit [tokens]; absent: the GEMM tile height"
    )
    attention_bwd_accumulator_columns: PosInt | None = Field(
        default=None,
        description="fp32 accumulator columns of 128 lanes one SM holds for the attention backward (tensor memory "
        "on Blackwell, the register file on Hopper) [-]: a work unit's accumulators take 2 x attention_tile_q + d_qk "
        "+ d_v columns, and above capacity the backward ceiling scales by capacity / demand; absent: no limit",
    )
    attention_kv_overhead: NonNegative | None = Field(
        default=None,
        description="prologue + epilogue of one attention work unit, in keys of main-loop time [tokens] (calibration)",
    )
    attention_tail_weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        default=None,
        description="fraction of the longest work unit (the last query tile of a causal sequence) "
        "that runs after the others have finished [-] (calibration)",
    )

    # softmax exponentials of fused attention on their own pipeline (hnplan.compute.attention); absent rates: none
    tensor_flops_per_clk_per_sm: Positive | None = Field(None, description="dense bf16 tensor rate [FLOP/clk/SM]")
    sfu_exp_per_clk_per_sm: Positive | None = Field(None, description="MUFU.EX2 exponential rate [1/clk/SM]")
    attention_exp_overlap_exponent: dict[Literal["fwd", "bwd"], Annotated[float, Field(ge=1.0)]] | None = Field(
        default=None,
        description="p of (t_tensor^p + t_exp^p)^(1/p), the attention kernel's overlap of its tensor-core time and "
        "its softmax exponentials per pass [-]: 1 in series; absent: max(t_tensor, t_exp) (calibration)",
    )
    softmax_fp32_ops_per_score: dict[Literal["fwd", "bwd"], NonNegative] | None = Field(
        default=None,
        description="instructions on the FP32 pipe per attention score element besides its exponential, per pass "
        "(scale, max, subtract, conversions, row sums; backward dS = P (dP - D)) [-], each at "
        "fp32_ops_per_clk_per_sm beside the MUFU rate; absent: 0 (calibration)",
    )
    fp32_ops_per_clk_per_sm: Positive | None = Field(None, description="FP32 instruction rate [1/clk/SM]")
    attention_fp8_ratio: dict[Literal["fwd", "bwd"], Positive] | None = Field(
        default=None, description="FP8 / bf16 attention kernel rate per pass [-], from the stack's for FP8 attention"
    )
    attention_fp8_ratio_head_dim: Positive | None = Field(
        default=None,
        description="mean head dimension (d_qk + d_v) / 2 the FP8 ratio was measured at [-]: the ratio is taken as "
        "the tensor-core pipeline's there and carried to other head dimensions with the exponentials' share "
        "(hnplan.compute.attention.fp8_tensor_ratio); None: the whole kernel's ratio at every head dimension",
    )
    attention_fp8_sliding_bwd_causal: bool = Field(
        default=False,
        description="the FP8 attention backward of a sliding-window layer runs the whole causal triangle (the "
        "stack's attention_fp8_sliding_bwd_causal for this chip, set with FP8 attention)",
    )
    _calibrations: ClassVar[tuple[str, ...]] = (
        "matmul_efficiency",
        "attention_exp_overlap_exponent",
        "softmax_fp32_ops_per_score",
        "hbm_efficiency",
        "kernel_overhead_us",
        "attention_efficiency",
        "attention_kv_overhead",
        "attention_tail_weight",
        "memory_kernel_efficiency",
        "gemm_efficiency",
        "gemm_k_overhead",
        "gemm_overlap_exponent",
        "gemm_splitk_us",
        "gemm_wave_weight",
        "gemm_output_exposed",
        "grouped_gemm_overlap_exponent",
        "host_dispatch_us",
        "sustained_compute_fraction",
        "mxfp8_gemm_ratio",
    )

    @model_validator(mode="after")
    def _bf16_present(self):
        if "bf16" not in self.dense_tflops:
            raise ValueError("dense_tflops must include bf16")
        missing = set(self.dense_tflops) - set(self.matmul_efficiency)
        if missing:
            raise ValueError(f"matmul_efficiency lacks dtypes {sorted(missing)} that dense_tflops lists")
        if self.idle_w is not None and self.idle_w >= self.tdp_w:
            raise ValueError(f"idle_w ({self.idle_w:g} W) must be below tdp_w ({self.tdp_w:g} W)")
        if problem := hbm_visible_problem(self.hbm_visible_gib, self.hbm_gb):
            raise ValueError(problem)
        if problem := memory_bandwidth_problem(self.hbm_bw_TBps, self.dense_tflops["bf16"]):
            raise ValueError(problem)
        return self


class Interconnect(Entry):
    """A link technology (NVLink 4, InfiniBand NDR, RoCE 400G, Huawei UB, ...)."""

    kind: Literal["scale-up", "scale-out"] = Field(description="inside a scale-up domain or between domains")
    technology: str = Field(description="marketing name and generation, e.g. NVLink 4, InfiniBand NDR")
    bw_efficiency: Fraction = Field(
        description="achievable fraction of the per-direction line rate for large messages (calibration)"
    )
    link_latency_ns: NonNegative = Field(description="one link's propagation + serdes latency [ns]")
    switch_latency_ns: NonNegative = Field(description="one switch hop's latency [ns]")
    software_overhead_us: Annotated[float, Field(ge=0.0, le=1000.0)] = Field(  # 1.4-4 us measured; ns above 1 ms
        description="per-step software/launch overhead of a collective algorithm step [us]"
    )
    in_network_reduction: bool = Field(
        default=False, description="the fabric's switches can reduce (NVLink SHARP, IB SHARP)"
    )
    transceiver_w: Annotated[float, Field(gt=0.0, le=MAX_POWER_W)] | None = Field(
        default=None, description="power of one optical transceiver module at one link end [W]; none for copper"
    )
    inr_efficiency: Fraction | None = Field(
        default=None,
        description="achievable fraction of the (bw_efficiency x line rate) bandwidth when the switches reduce "
        "(NCCL's nvlsEfficiency for NVLink SHARP); required when in_network_reduction is true (calibration)",
    )

    alltoall_efficiency: Fraction | None = Field(
        default=None,
        description="achievable fraction of the per-direction line rate for the expert-parallel dispatch and combine "
        "all-to-all, as a published EP library measures it (DeepEP); none: bw_efficiency (calibration)",
    )
    flex_alltoall_efficiency: Fraction | None = Field(
        default=None,
        description="achievable fraction of the per-direction line rate of a scale-out fabric for the flex "
        "expert-parallel dispatcher's cross-node traffic (DeepEP / HybridEP internode kernels) as a training "
        "framework calls them, the per-call layout and metadata work included; none: alltoall_efficiency or "
        "bw_efficiency, as NCCL's all-to-all (calibration)",
    )
    inr_tree_head_busbw_GBps: tuple[LinkRate, LinkRate] | None = Field(
        default=None,
        description="all-reduce busbw one head (a GPU with its NIC) sustains in the in-network-reduction + tree "
        "all-reduce across scale-up domains (NCCL's NVLS_TREE), on two domains and on three or more [GB/s]; "
        "none: no such limit (calibration)",
    )
    # at most 1 ms, 175x the 5.69 us solved for NVLink 4 (data/interconnects/nvlink4.yaml): a figure in ns is another unit
    inr_chunk_step_us: Annotated[float, Field(gt=0.0, le=1000.0)] | None = Field(
        default=None,
        description="fixed time of one chunk step of NCCL's NVLS all-reduce inside one domain, besides its bytes "
        "[us]: smaller messages move in smaller chunks (NVIDIA/nccl src/enqueue.cc) and pay more steps per byte "
        "(hnplan.comm.nccl.nvls_chunk_time_s); none: no chunk term (calibration)",
    )
    nccl_link: Literal["nvlink", "pci", "net"] | None = Field(
        default=None,
        description="the class NCCL's tuner gives these links for its per-step latencies (hwLatencies in "
        "NVIDIA/nccl src/graph/tuning.cc: NVLink, PCI, network); collectives on it are timed per NCCL algorithm "
        "and protocol (hnplan.comm.nccl); none: not an NCCL fabric, every step costs software_overhead_us",
    )
    nccl_generation: Literal["volta", "ampere", "hopper", "blackwell"] | None = Field(
        default=None,
        description="the GPU generation NCCL's tuner indexes its per-channel bandwidth caps by (compCapIndex in "
        "NVIDIA/nccl src/graph/tuning.cc: perChMaxRingLL128Bws, perChMaxTreeBws, perChMaxTreeLL128Bws) for the "
        "GPUs this scale-up fabric joins; none: no per-channel caps (hnplan.comm.nccl)",
    )
    ll_max_busbw_GBps: Positive | None = Field(
        default=None,
        description="busbw cap of the LL protocol inside one domain (NCCL's llMaxBws, single node) [GB/s]; LL "
        "also moves at most half of the ring bandwidth (8-byte lines carry 4 bytes of data)",
    )
    _calibrations: ClassVar[tuple[str, ...]] = (
        "bw_efficiency",
        "software_overhead_us",
        "inr_efficiency",
        "alltoall_efficiency",
        "flex_alltoall_efficiency",
        "inr_tree_head_busbw_GBps",
        "inr_chunk_step_us",
        "ll_max_busbw_GBps",
    )

    @model_validator(mode="after")
    def _inr(self):
        if self.in_network_reduction and self.inr_efficiency is None:
            raise ValueError("in_network_reduction is true: give inr_efficiency (with its provenance)")
        return self


class Switch(Entry):
    """A switch model (scale-out or scale-up)."""

    fabric: str = Field(description="interconnect id the switch speaks")
    ports: PosInt = Field(description="logical ports at port_gbps (radix)")
    port_gbps: LinkRate = Field(description="rate of one logical port [Gb/s] per direction")
    power_w: Annotated[float, Field(ge=MIN_POWER_W, le=MAX_POWER_W)] = Field(
        description="typical power without transceivers [W]"
    )
