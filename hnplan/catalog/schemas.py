"""Schemas of the catalogs in ``data/``: one pydantic model per catalog kind.

The same models validate the YAML files and document them (``hnplan catalog schema KIND`` and the
README print their fields). Conventions:

* Unknown keys are rejected (``extra="forbid"``); entries are frozen once loaded.
* Units are spelled in the key, in the field's customary units: ``hbm_gb`` is decimal gigabytes
  (1e9 bytes, as datasheets print), ``hbm_bw_TBps`` terabytes per second, ``nic_gbps`` gigabits per
  second, ``scaleup_bw_GBps_per_dir`` gigabytes per second *per direction*.  Conversion to SI happens
  in :mod:`hnplan.units`, never here.
* Every entry carries a non-empty ``source``.  A field whose value comes from elsewhere names it in
  ``field_sources``; a value nobody published is listed in ``assumptions`` with the reason.
  Calibration factors (efficiencies) must have their own ``field_sources`` or ``assumptions`` item.
* Ids are lower-kebab-case with dots allowed inside version numbers (``llama3.1-405b``).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ID_PATTERN = r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$"
_PLACEHOLDER = re.compile(r"^\s*(todo|tbd|fixme|xxx|\?+|n/?a|none|unknown)\s*[.!:]?\s*$", re.I)

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
Positive = Annotated[float, Field(gt=0.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
PosInt = Annotated[int, Field(gt=0)]


def _check_source(value: str) -> str:
    if not value or not value.strip() or _PLACEHOLDER.match(value) or "TODO" in value:
        raise ValueError(
            "must name a datasheet, paper and table, or a labelled assumption; got an empty or placeholder source"
        )
    return value


Source = Annotated[str, Field(min_length=3)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


class Entry(_Strict):
    """Fields shared by every catalog entry."""

    id: str = Field(pattern=ID_PATTERN, description="lower-kebab-case id, e.g. h100-sxm")
    name: str = Field(min_length=1, description="human-readable name")
    source: Source = Field(description="datasheet, paper and table, or repository file")
    notes: str | None = None
    field_sources: dict[str, str] = Field(
        default_factory=dict, description="field -> source, where it differs from `source`"
    )
    assumptions: dict[str, str] = Field(
        default_factory=dict, description="field -> why this unpublished value was assumed"
    )

    _calibrations: ClassVar[tuple[str, ...]] = ()

    @field_validator("source")
    @classmethod
    def _source_not_placeholder(cls, v: str) -> str:
        return _check_source(v)

    @model_validator(mode="after")
    def _provenance_keys(self):
        known = set(type(self).model_fields)
        for label, mapping in (("field_sources", self.field_sources), ("assumptions", self.assumptions)):
            for key, text in mapping.items():
                if key.split(".")[0] not in known:
                    raise ValueError(f"{label} names unknown field {key!r}; fields: {', '.join(sorted(known))}")
                _check_source(text)
        for cal in self._calibrations:
            if getattr(self, cal, None) is None:
                continue
            if not any(k.split(".")[0] == cal for k in (*self.field_sources, *self.assumptions)):
                raise ValueError(
                    f"calibration field {cal!r} needs its own provenance: add it to field_sources "
                    "(measurement and source) or to assumptions (with the reason)"
                )
        return self


class Accelerator(Entry):
    """One accelerator (GPU or NPU package) as the planner sees it."""

    vendor: str = Field(description="manufacturer")
    dense_tflops: dict[Dtype, Positive] = Field(
        description="dense (not 2:4-sparse) peak [TFLOP/s, 1e12] per dtype; must include bf16"
    )
    hbm_gb: Positive = Field(description="HBM capacity [GB, 1e9 bytes] as the datasheet states it")
    hbm_bw_TBps: Positive = Field(description="HBM bandwidth [TB/s, 1e12 bytes/s]")
    hbm_visible_gib: Positive | None = Field(
        default=None,
        description="device memory the driver reports to programs (torch.cuda.mem_get_info total "
        "or nvidia-smi memory.total) [GiB, 2**30 bytes]; when absent the memory model reads hbm_gb as GiB less "
        "the driver reservation measured on H100 (hnplan.memory.breakdown.HBM_DRIVER_RESERVE_FRACTION)",
    )
    scaleup_bw_GBps_per_dir: Positive = Field(
        description="scale-up (NVLink / xGMI / UB) bandwidth of one accelerator, all links, one direction [GB/s]"
    )
    tdp_w: Positive = Field(description="thermal design power of the accelerator [W]")
    idle_w: Positive | None = Field(default=None, description="idle power [W]")
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
    host_dispatch_us: NonNegative | None = Field(
        default=None,
        description="host time per operator call from an eager framework; back-to-back calls run no "
        "faster [us]; used for eager timings only (hnplan gemm --launch eager), never by the planners (calibration)",
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
    attention_kv_overhead: NonNegative | None = Field(
        default=None,
        description="prologue + epilogue of one attention work unit, in keys of main-loop time [tokens] (calibration)",
    )
    attention_tail_weight: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        default=None,
        description="fraction of the longest work unit (the last query tile of a causal sequence) "
        "that runs after the others have finished [-] (calibration)",
    )

    _calibrations: ClassVar[tuple[str, ...]] = (
        "matmul_efficiency",
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
        "host_dispatch_us",
    )

    @model_validator(mode="after")
    def _bf16_present(self):
        if "bf16" not in self.dense_tflops:
            raise ValueError("dense_tflops must include bf16")
        missing = set(self.dense_tflops) - set(self.matmul_efficiency)
        if missing:
            raise ValueError(f"matmul_efficiency lacks dtypes {sorted(missing)} that dense_tflops lists")
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
    software_overhead_us: NonNegative = Field(
        description="per-step software/launch overhead of a collective algorithm step [us]"
    )
    in_network_reduction: bool = Field(
        default=False, description="the fabric's switches can reduce (NVLink SHARP, IB SHARP)"
    )
    transceiver_w: Positive | None = Field(
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

    _calibrations: ClassVar[tuple[str, ...]] = (
        "bw_efficiency",
        "software_overhead_us",
        "inr_efficiency",
        "alltoall_efficiency",
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
    port_gbps: Positive = Field(description="rate of one logical port [Gb/s] per direction")
    power_w: Positive = Field(description="typical power without transceivers [W]")


class System(Entry):
    """A building block (8-GPU server, NVL72 rack, supernode) and the networks that join them."""

    kind: Literal["server-cluster", "supernode"] = Field(
        description="server-cluster: small scale-up domain joined by a switched network; supernode: large scale-up domain"
    )
    accelerator: str = Field(description="accelerator id")
    node_gpus: PosInt = Field(description="accelerators per node (server or compute tray)")
    scaleup_domain_gpus: PosInt = Field(description="accelerators in one scale-up (NVLink/UB) domain")
    scaleup_fabric: str = Field(description="interconnect id of the scale-up domain")
    scaleup_topology: Literal["switched", "full-mesh", "torus-2d", "torus-3d", "clos"] = Field(
        description="shape of the scale-up domain"
    )
    scaleup_bw_GBps_per_dir: Positive | None = Field(
        default=None,
        description="per-accelerator scale-up bandwidth [GB/s per direction] if it differs from the accelerator's",
    )
    scaleup_switch: str | None = Field(default=None, description="switch id inside the domain")
    scaleup_switches_per_domain: NonNegative | None = Field(default=None, description="switch chips per domain")
    scaleout_fabric: str = Field(description="interconnect id of the scale-out network")
    nics_per_node: PosInt = Field(description="scale-out NICs per node (compute network only)")
    nic_gbps: Positive = Field(description="line rate of one scale-out NIC [Gb/s] per direction")
    scaleout_topology: Literal["fat-tree", "rail-optimized-fat-tree"] = Field(
        description="scale-out network shape (rail-optimised: NIC k of every node on leaf group k)"
    )
    scaleout_switch: str = Field(description="switch id of the scale-out network")
    scaleout_oversubscription: Annotated[float, Field(ge=1.0)] = Field(
        default=1.0, description="downlink:uplink ratio at the leaf tier (1 = non-blocking)"
    )
    scaleup_in_network_reduction: bool = Field(
        default=False,
        description="collectives reduce in the scale-up switches (NVLink SHARP, NCCL NVLS) on this "
        "system as deployed; needs a scale-up fabric with in_network_reduction",
    )
    scaleout_in_network_reduction: bool = Field(
        default=False,
        description="collectives reduce in the scale-out switches (IB SHARP through NCCL CollNet, "
        "NCCL_COLLNET_ENABLE=1) on this system as deployed; needs a scale-out fabric with "
        "in_network_reduction",
    )
    scaleup_inr_efficiency: Fraction | None = Field(
        default=None,
        description="in-network-reduction efficiency measured on this system as deployed (NVLS all-reduce "
        "bandwidth over the scale-up line rate x bw_efficiency); replaces the fabric's inr_efficiency, "
        "a single-node tuner constant (calibration)",
    )
    unit_gpus: PosInt = Field(description="accelerators in one purchasable unit (server, rack or supernode)")
    unit_power_kw: Positive = Field(
        description="IT power of one unit at full load [kW], incl. hosts, NICs and scale-up switches"
    )
    gpus_per_rack: PosInt = Field(
        description="accelerators per rack, averaged over compute and in-domain network racks"
    )
    cooling: Literal["air", "liquid"] = Field(description="selects the facility's PUE default")
    host_memory_gb_per_node: Positive | None = Field(default=None, description="host DDR/LPDDR per node [GB]")
    host_link_GBps_per_gpu: Positive | None = Field(
        default=None, description="accelerator <-> host memory bandwidth per accelerator [GB/s per direction]"
    )
    host_link_kind: Literal["pcie", "nvlink-c2c"] = Field(
        default="pcie", description="link between accelerator and host memory (PCIe, or a chip-to-chip NVLink-C2C)"
    )
    pooled_memory_tb: Positive | None = Field(default=None, description="memory pool shared by a domain (CXL) [TB]")
    pooled_memory_GBps_per_gpu: Positive | None = Field(
        default=None, description="bandwidth from one accelerator to the pooled memory [GB/s per direction]"
    )
    pooled_memory_nodes: PosInt | None = Field(
        default=None,
        description="nodes sharing the pool (a CXL switch or fabric-attached memory); default the scale-up domain's",
    )
    pooled_memory_latency_ns: Positive | None = Field(
        default=None, description="load latency of the pooled memory [ns]"
    )
    nvme_tb_per_node: Positive | None = Field(default=None, description="local NVMe per node [TB]")
    nvme_read_GBps_per_node: Positive | None = Field(
        default=None, description="aggregate sequential read bandwidth of the local NVMe drives of a node [GB/s]"
    )
    storage_write_GBps_per_node: Positive | None = Field(
        default=None, description="checkpoint write bandwidth per node [GB/s]"
    )
    # -- reliability and deployment (issue 8) ------------------------------------------------
    failure_unit_gpus: PosInt | None = Field(
        default=None,
        description="accelerators one hardware failure takes out of a job (blast radius); defaults to node_gpus",
    )
    hot_swap: bool = Field(default=False, description="a failed node/tray can be replaced while its domain runs")
    spare_gpus_per_unit: Annotated[int, Field(ge=0)] = Field(
        default=0, description="accelerators per purchasable unit held as in-domain hot spares"
    )
    repair_hours: Positive | None = Field(
        default=None, description="time to return a failed failure unit to service [h]"
    )
    deploy_days: Positive | None = Field(
        default=None,
        description="delivery to production of one cluster of this design [days], a measured figure; "
        "default derived from the bill of materials (hnplan.deployment)",
    )
    # -- storage and memory pool (issue 15) ----------------------------------------------------
    storage: str | None = Field(
        default=None, description="storage id (data/storage/) the design's checkpoints and data loader use"
    )
    storage_gpus_per_unit: PosInt | None = Field(
        default=None, description="accelerators served per unit of the named storage (the sizing rule)"
    )
    scaleup_field_links_per_domain: Annotated[int, Field(ge=0)] = Field(
        default=0,
        description="scale-up links cabled on site between the racks of one domain (0 when the domain "
        "is cabled in the factory: a backplane, a copper spine)",
    )
    # -- a price of its own (issue 17): a system file outside data/ can be costed -------------------
    unit_price_usd: Positive | None = Field(
        default=None,
        description="price of one purchasable unit [USD], e.g. a quote; overrides prices.yaml "
        "(give its provenance in field_sources or assumptions)",
    )
    price_item: str | None = Field(
        default=None,
        description="the prices.yaml item whose price one unit costs (e.g. gb200-nvl72 for a "
        "re-cabled copy); default the system's own id",
    )

    _calibrations: ClassVar[tuple[str, ...]] = ("scaleup_inr_efficiency",)

    @model_validator(mode="after")
    def _shapes(self):
        if self.scaleup_domain_gpus % self.node_gpus:
            raise ValueError(
                f"scaleup_domain_gpus ({self.scaleup_domain_gpus}) must be a multiple of node_gpus ({self.node_gpus})"
            )
        return self


class MoE(_Strict):
    """Mixture-of-experts fields of a model."""

    experts: PosInt = Field(description="routed experts per MoE layer")
    active_experts: PosInt = Field(description="routed experts per token (top-k)")
    shared_experts: Annotated[int, Field(ge=0)] = 0
    expert_ffn_hidden: PosInt = Field(description="FFN hidden size of one expert")
    first_dense_layers: Annotated[int, Field(ge=0)] = Field(
        default=0, description="leading layers with a dense MLP of ffn_hidden instead of experts"
    )
    expert_groups: PosInt | None = Field(
        default=None, description="group-limited routing: experts fall in this many groups (HF n_group)"
    )
    groups_per_token: PosInt | None = Field(
        default=None,
        description="group-limited routing: a token's experts come from at most this many groups (HF topk_group)",
    )

    @model_validator(mode="after")
    def _k_le_e(self):
        if self.active_experts > self.experts:
            raise ValueError(f"active_experts ({self.active_experts}) exceeds experts ({self.experts})")
        if (self.expert_groups is None) != (self.groups_per_token is None):
            raise ValueError("expert_groups and groups_per_token go together (group-limited routing)")
        if (
            self.expert_groups is not None
            and self.groups_per_token is not None
            and (self.experts % self.expert_groups or self.groups_per_token > self.expert_groups)
        ):
            raise ValueError(
                f"expert_groups ({self.expert_groups}) must divide experts ({self.experts}) and be "
                f">= groups_per_token ({self.groups_per_token})"
            )
        return self


class MLA(_Strict):
    """DeepSeek multi-head latent attention fields (DeepSeek-V2/V3 config names)."""

    q_lora_rank: PosInt | None = None
    kv_lora_rank: PosInt
    qk_nope_head_dim: PosInt
    qk_rope_head_dim: PosInt
    v_head_dim: PosInt


class Model(Entry):
    """A transformer model's architecture, as in its published config."""

    layers: PosInt = Field(description="transformer layers")
    hidden: PosInt = Field(description="model (embedding) width [elements]")
    ffn_hidden: PosInt = Field(description="dense MLP hidden size")
    heads: PosInt = Field(description="attention (query) heads")
    kv_heads: PosInt = Field(description="key/value heads (= heads for MHA, 1 for MQA)")
    head_dim: PosInt | None = Field(default=None, description="defaults to hidden / heads")
    vocab: PosInt = Field(description="vocabulary size [tokens]")
    max_seq: PosInt = Field(description="maximum sequence length [tokens]")
    activation: Literal["gelu", "swiglu"] = Field(description="MLP type: plain GELU (2 matrices) or gated SwiGLU (3)")
    position_embedding: Literal["learned", "rope", "alibi"]
    tied_embeddings: bool = Field(default=False, description="LM head shares the input embedding matrix")
    dropout: bool = Field(
        default=True,
        description="hidden and attention dropout on in training (masks stored for "
        "the backward, Korthikanti et al. arXiv:2205.05198 Sec. 4.1); "
        "False for recipes with zero dropout (Llama)",
    )
    moe: MoE | None = Field(default=None, description="mixture-of-experts fields (experts, active_experts, ...)")
    mla: MLA | None = Field(default=None, description="multi-head latent attention ranks (DeepSeek-V2/V3)")
    params_b_published: Positive | None = Field(default=None, description="published parameter count [1e9]")
    mtp_modules: int = Field(
        default=0,
        ge=0,
        description="multi-token-prediction modules trained with the model (DeepSeek-V3: 1, arXiv:2412.19437 "
        "Sec. 2.2): each one more transformer layer and one more pass through the output head and loss",
    )

    @model_validator(mode="after")
    def _heads(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); set head_dim")
        return self


class SourcedValue(_Strict):
    """One number with its provenance (PyPSA technology-data style)."""

    value: float
    unit: str = Field(min_length=1)
    source: Source
    as_of: _dt.date | None = None
    assumption: bool = Field(default=False, description="true when the value is a labelled assumption")

    @field_validator("source")
    @classmethod
    def _src(cls, v):
        return _check_source(v)


class Price(Entry):
    """A dated price of something the bill of materials counts."""

    item: str = Field(description="the catalog id priced (system, switch) or a BOM part name")
    kind: Literal["system-unit", "switch", "transceiver", "cable", "nic", "rack", "other"]
    usd: Positive = Field(description="price [US dollars] for one `per`")
    per: str = Field(description="what one price buys: unit, switch, transceiver, cable, ...")
    as_of: _dt.date = Field(
        description="date of the price (YYYY-MM-DD; use the first of the month if only the month is known)"
    )
    assumption: bool = False


class Facility(Entry):
    """Facility and finance defaults, each value with its own provenance."""

    electricity_usd_per_kwh: SourcedValue
    pue_air: SourcedValue
    pue_liquid: SourcedValue
    amortisation_years: SourcedValue
    dc_build_usd_per_mw: SourcedValue
    maintenance_fraction_per_year: SourcedValue
    grid_gco2_per_kwh: SourcedValue
    training_power_fraction: SourcedValue = Field(
        description="average draw of a training node as a fraction of its rated power"
    )
    # -- power curve, racks (issue 8) -------------------------------------------------------
    accelerator_idle_fraction: SourcedValue | None = Field(
        default=None, description="idle power of an accelerator without idle_w, as a fraction of its TDP"
    )
    rack_limit_kw_air: SourcedValue | None = Field(
        default=None, description="IT power limit of one air-cooled rack [kW]"
    )
    rack_limit_kw_liquid: SourcedValue | None = Field(
        default=None, description="IT power limit of one liquid-cooled rack [kW]"
    )


class ComponentRate(SourcedValue):
    """A failure (interruption) rate of one component kind, per component and hour."""

    per: Literal["accelerator", "host", "nic", "scaleout-link", "job-gpu"] = Field(
        description="what one count is: an accelerator, a host (node), a NIC, a scale-out link, or a GPU "
        "of the job (software and job-level faults)"
    )


class Reliability(Entry):
    """Failure rates per component and the checkpoint/restart defaults (``data/reliability.yaml``)."""

    rates: dict[str, ComponentRate] = Field(
        description="component -> unexpected interruptions per component-hour [1/h]"
    )
    planned_per_gpu_hour: SourcedValue = Field(description="planned interruptions per job GPU-hour [1/h]")
    restart_overhead_s: SourcedValue = Field(
        description="job restart excluding the checkpoint read: detection, rescheduling, init [s]"
    )
    storage_write_GBps_per_node: SourcedValue = Field(
        description="checkpoint write bandwidth per node when the system gives none [GB/s]"
    )
    storage_read_GBps_per_node: SourcedValue = Field(
        description="checkpoint read bandwidth per node when the system gives none [GB/s]"
    )
    repair_hours: SourcedValue = Field(description="time to repair a failure unit when the system gives none [h]")
    deploy_days: SourcedValue = Field(description="delivery-to-production time when the system gives none [days]")
    # -- issue 15: hot swap and deployment from the bill of materials ---------------------------
    hot_swap_repair_hours: SourcedValue | None = Field(
        default=None, description="time to swap a failed card in a running node (hot swap) [h]"
    )
    install_hours: dict[str, SourcedValue] = Field(
        default_factory=dict,
        description="technician-hours to install one item of the bill of materials (rack, system-unit, "
        "cable, transceiver, switch, coolant-loop)",
    )
    install_technicians_per_mw: SourcedValue | None = Field(
        default=None, description="technicians installing in parallel per MW of IT power [1/MW]"
    )
    install_shift_hours_per_day: SourcedValue | None = Field(
        default=None, description="working hours per day of the install crews [h/day]"
    )
    commission_days: SourcedValue | None = Field(
        default=None, description="burn-in and acceptance after the last item is installed [days]"
    )


WhatIfInput = Literal[
    "electricity_usd_per_kwh",
    "pue",
    "hardware_price_factor",
    "utilisation",
    "rate_factor",
    "write_GBps_per_node",
    "years",
    "dc_build_usd_per_mw",
    "maintenance_fraction",
]
WHATIF_INPUTS = get_args(WhatIfInput)


class UncertainInput(Entry):
    """The plausible range of one procurement what-if input (``data/uncertainty.yaml``)."""

    input: WhatIfInput = Field(description="the what-if input this range applies to")
    unit: str = Field(min_length=1)
    distribution: Literal["uniform", "triangular"] = "uniform"
    low: float
    high: float
    mode: float | None = Field(default=None, description="most likely value (triangular only)")
    as_of: _dt.date | None = None
    assumption: bool = False

    @model_validator(mode="after")
    def _ordered(self):
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.distribution == "triangular" and (self.mode is None or not self.low <= self.mode <= self.high):
            raise ValueError("a triangular range needs low <= mode <= high")
        return self


class MemoryOverheads(Entry):
    """Runtime memory overheads per accelerator process that no tensor of the model accounts for, and
    the serving engine's memory defaults; each value with its own provenance."""

    cuda_context_gib: SourcedValue = Field(
        description="CUDA context, kernel images and library workspaces of one process [GiB]"
    )
    nccl_gib_per_communicator: SourcedValue = Field(
        description="device buffers of one NCCL communicator running ring/tree collectives [GiB]"
    )
    nccl_alltoall_extra_gib: SourcedValue = Field(
        description="extra device buffers once a communicator runs all-to-all (all peers connected) [GiB]"
    )
    allocator_fragmentation_fraction: SourcedValue = Field(
        description="memory the caching allocator reserves but cannot use, as a fraction of tensor memory"
    )
    serving_memory_utilization: SourcedValue = Field(
        description="fraction of device memory a serving engine may use (vLLM gpu_memory_utilization)"
    )
    serving_max_batched_tokens: SourcedValue = Field(
        description="tokens in the largest forward pass the serving engine plans its activation workspace for"
    )


class ScenarioNotebook(_Strict):
    notebook: str = Field(description="notebook name in notebooks/ without .ipynb")
    parameters: dict = Field(default_factory=dict)


class Scenario(_Strict):
    """A named study: which notebooks to run with which parameters."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    description: str = ""
    notebooks: list[ScenarioNotebook] = Field(min_length=1)


class StackChoices(_Strict):
    """A training software stack's choices: which communication overlaps compute, the attention
    kernel, sequence parallelism and the gradient width on the wire. Declared once here:
    :class:`SoftwareStack` inherits these fields and the training planner's job carries one of these
    (``hnplan.planning.training.StackChoices``), so a new choice appears in both. Defaults: hnplan's
    default stack (``data/stacks/megatron-core.yaml``).

    Attributes
    ----------
    tp_comm : bool
        TP collectives overlap the layer's GEMMs (Transformer Engine ``--tp-comm-overlap``, opt-in);
        default False: exposed, as in Megatron-LM 2021 (Narayanan et al., SC21, arXiv:2104.04473).
    ep_comm : bool
        Expert all-to-all hidden behind compute (DeepSeek-V3 DualPipe, arXiv:2412.19437 Sec. 3.2.1);
        default False.
    cp_comm : bool
        Ring-attention K/V exchange overlaps attention (Liu et al., arXiv:2310.01889; Megatron-Core's
        implementation); default True.
    dp_grad_reduce, dp_param_gather : bool
        Bucketed overlap of the gradient reduce-scatter with the backward and of the parameter
        all-gather with the forward (Megatron-Core ``distributed_data_parallel_config.py``); default
        True. Megatron-LM 2021 did neither.
    grad_reduce_bytes : float
        Bytes per gradient element on the wire: 4 (fp32, Megatron-LM's
        ``--accumulate-allreduce-grads-in-fp32`` for bf16) by default; 2 for bf16 reduction.
    attention : {"flash", "unfused"}
        ``flash`` (default, fused kernel, no ``s x s`` scores in HBM or in the activations, Dao et al.
        arXiv:2205.14135) or ``unfused`` (scores materialised, as Megatron-LM ran before FlashAttention).
    sequence_parallel : bool
        Megatron sequence parallelism (Korthikanti et al., arXiv:2205.05198, Sec. 4.2.2): with
        ``tp > 1`` the norms, dropouts and residual adds run on ``tokens / tp`` and their activations are
        split over ``tp``; default True. The TP collectives move the same volume either way.
    tp_comm_overlap_fraction : float
        With ``tp_comm``, the share of the TP collective time that runs concurrently with the layer's
        GEMMs [0-1]; the rest (the first or last chunk of a pipelined split) stays exposed. Default 0.75.
    ep_comm_overlap_fraction : float
        With ``ep_comm``, the share of the expert all-to-all time hidden behind compute [0-1]. Default 1.
    overlap_gemm_slowdown : float
        Fractional slowdown of the compute that runs alongside an overlapped collective (the SMs the
        communication kernels take and the HBM bandwidth they share): a hidden second of communication
        costs this many seconds of compute. Default 0.14 (16 of 132 SMs, see the stack files).
    fp8_params : bool
        fp8 training keeps the weights only as fp8 tensors (Megatron-Core ``--fp8-param-gather``, NeMo
        ``FP8_PARAMS``): 1 byte a weight plus its cached fp8 transpose, no bf16 copy; the fp32 master
        weights live in the (distributed) optimizer. Default False.
    fp8_weight_cache : bool
        With bf16 weights and fp8 GEMMs, Transformer Engine keeps each weight's fp8 cast and its
        transpose from the first micro-batch of a step to the last (``is_first_microbatch`` caching in
        ``transformer_engine/pytorch/module/linear.py``; Megatron-Core passes it unless
        ``disable_parameter_transpose_cache``): 2 bytes a parameter. False: the casts are transient.
    pipeline_balanced_ends : bool
        The input embedding and the loss each take one layer's place in the pipeline split, so the
        first and the last stage hold one layer fewer (Llama 3, arXiv:2407.21783 Sec. 3.3.2;
        Megatron-Core ``--account-for-embedding-in-pipeline-split`` and
        ``--account-for-loss-in-pipeline-split``). Default False (Megatron-Core's default).
    fp8_recipe : {"delayed", "current", "mxfp8", "blockwise"}
        How fp8 GEMM inputs are scaled (Transformer Engine recipes ``DelayedScaling``,
        ``Float8CurrentScaling``, ``MXFP8BlockScaling``): ``delayed`` (default; Megatron-LM
        ``--fp8-recipe delayed``) takes the scale from an amax history and computes the amax inside the
        cast; ``current`` reads each tensor once more for its amax before casting; ``mxfp8`` (Blackwell)
        writes row-wise and column-wise quantised copies with one E8M0 scale byte per 32 elements;
        ``blockwise`` the same copies with an fp32 scale per 1 x 128 tile (DeepSeek-V3, ``Float8BlockScaling``).
        Bytes: :mod:`hnplan.compute.fp8_recipes`.
    fp8_norm_cast_fusion : bool
        The norm before a GEMM writes its fp8 input directly (Transformer Engine ``LayerNormLinear`` /
        ``LayerNormMLP``; delayed and MXFP8 recipes only, a current-scaling cast needs the finished
        tensor's amax). Default True.
    fp8_cast_transpose_fusion : bool
        Where per-tensor fp8 GEMMs need transposed copies (Hopper), one kernel writes the cast and its
        transpose (Transformer Engine ``cast_transpose``). Default True.
    norm_kernel, rope_kernel : {"fused", "eager"}
        ``fused`` (default): one kernel per norm / rotary embedding (Transformer Engine, Apex);
        ``eager``: the chain of PyTorch operators Hugging Face models run (RMSNorm with an fp32
        upcast, rotary as ``q cos + rotate_half(q) sin``), bytes in :mod:`hnplan.compute.fp8_recipes`.
    fp8_bf16_end_layers : int
        In fp8 training, this many Transformer layers at each end of the model run in bf16 (Megatron-Core
        ``--first-last-layers-bf16`` with ``--num-layers-at-start-in-bf16`` / ``-at-end-``); they slow the
        first and the last pipeline stage. Default 0.
    offload : {"none", "auto"}
        ``auto``: a plan that does not fit in HBM moves optimizer states, gradients, weights and then
        activations to host or pooled memory (ZeRO-Offload, arXiv:2101.06840; ZeRO-Infinity,
        arXiv:2104.07857), the transfers hidden behind the step's compute as far as it lasts
        (:mod:`hnplan.planning.training.offload`). Default ``none``.
    ep_dispatch_fp8 : bool
        With fp8 training, the expert-parallel dispatch (forward) and its mirror in the backward (the
        activation gradients sent back to the experts before the down-projection) travel in FP8 with one
        fp32 scale per 128 elements; the combine and its mirror stay bf16 (DeepSeek-V3,
        arXiv:2412.19437 Sec. 3.3.2; DeepEP's FP8 dispatch). False: every all-to-all in bf16
        (Megatron-Core's all-to-all token dispatcher moves the bf16 hidden states and quantises after it).
    moe_load_imbalance : float
        Tokens routed to the busiest expert-parallel rank over the mean, >= 1: the step waits for that
        rank, so its routed-expert GEMMs and its all-to-all traffic scale by it. 1 for force-balanced
        benchmark routing.
    pipeline_schedule : {"1f1b", "dualpipe"}
        The pipeline schedule. ``1f1b``: a bubble of ``(pp - 1) / v`` micro-batch times (Megatron-LM
        1F1B and interleaved). ``dualpipe``: DeepSeek-V3's bidirectional schedule, whose bubble is
        ``(pp / 2 - 1)(F&B + B - 3 W)`` (arXiv:2412.19437 Sec. 3.2.1, Table 2: ``F&B`` a forward and a
        backward chunk overlapped, ``B`` a backward, ``W`` its weight-gradient part) for an even ``pp``
        without virtual stages (otherwise the 1F1B bubble).
    """

    tp_comm: bool = Field(default=False, description="TP collectives overlap the layer's GEMMs")
    ep_comm: bool = Field(default=False, description="expert all-to-all hidden behind compute")
    cp_comm: bool = Field(default=True, description="context-parallel K/V exchange overlaps attention")
    dp_grad_reduce: bool = Field(default=True, description="bucketed gradient reduce overlaps the backward")
    dp_param_gather: bool = Field(default=True, description="bucketed parameter all-gather overlaps the forward")
    grad_reduce_bytes: Positive = Field(default=4.0, description="bytes per gradient element on the wire [bytes]")
    attention: Literal["flash", "unfused"] = Field(
        default="flash", description="flash: fused FlashAttention; unfused: s x s scores materialised"
    )
    sequence_parallel: bool = Field(
        default=True,
        description="norms and residual adds (and their dropout masks) split over TP ranks "
        "(Megatron sequence parallelism)",
    )
    tp_comm_overlap_fraction: float = Field(
        default=0.75, ge=0.0, le=1.0, description="share of TP collective time hidden behind GEMMs when tp_comm"
    )
    ep_comm_overlap_fraction: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of expert all-to-all time hidden behind compute when ep_comm"
    )
    overlap_gemm_slowdown: float = Field(
        default=0.14, ge=0.0, le=1.0, description="compute slowdown per second of communication it hides"
    )
    fp8_params: bool = Field(default=False, description="fp8 training keeps weights only as fp8 (fp8 param gather)")
    fp8_weight_cache: bool = Field(
        default=True, description="Transformer Engine caches fp8 weight casts and transposes across micro-batches"
    )
    pipeline_balanced_ends: bool = Field(
        default=False, description="embedding and loss each take one layer's place on the first and last stage"
    )
    fp8_recipe: Literal["delayed", "current", "mxfp8", "blockwise"] = Field(
        default="delayed",
        description="fp8 scaling recipe: delayed (amax history), current (per tensor), mxfp8, blockwise (1 x 128)",
    )
    fp8_norm_cast_fusion: bool = Field(
        default=True, description="the norm before a GEMM writes its fp8 input (delayed and mxfp8 recipes)"
    )
    fp8_cast_transpose_fusion: bool = Field(
        default=True, description="one kernel writes an fp8 cast and its transpose (where transposes are needed)"
    )
    norm_kernel: Literal["fused", "eager"] = Field(
        default="fused", description="fused norm kernel, or PyTorch eager RMSNorm with fp32 upcast"
    )
    rope_kernel: Literal["fused", "eager"] = Field(
        default="fused", description="fused rotary kernel, or PyTorch eager q cos + rotate_half(q) sin"
    )
    fp8_bf16_end_layers: int = Field(
        default=0, ge=0, description="Transformer layers kept in bf16 at each end of the model in fp8 training"
    )
    offload: Literal["none", "auto"] = Field(
        default="none", description="move what does not fit in HBM to host or pooled memory (ZeRO-Offload/Infinity)"
    )
    ep_dispatch_fp8: bool = Field(
        default=False,
        description="fp8 training dispatches tokens to their experts in FP8 (1 byte an element plus one fp32 "
        "scale per 128) and combines in bf16",
    )
    moe_load_imbalance: float = Field(
        default=1.0,
        ge=1.0,
        description="tokens routed to the busiest expert-parallel rank over the mean (1 = balanced routing)",
    )
    pipeline_schedule: Literal["1f1b", "dualpipe"] = Field(
        default="1f1b",
        description="1f1b: Megatron's 1F1B / interleaved schedule; dualpipe: DeepSeek's bidirectional schedule "
        "(bubble (pp/2 - 1)(F&B + B - 3W), arXiv:2412.19437 Table 2)",
    )


class SoftwareStack(Entry, StackChoices):
    """A training software stack: its choices (:class:`StackChoices`: what it overlaps, its attention
    kernel, whether it runs sequence parallelism), the knobs it implements, and the GEMM efficiency
    measured inside training with it (per accelerator).

    ``matmul_efficiency`` replaces an accelerator's catalog value (a GEMM micro-benchmark) when a
    published in-training measurement with this stack exists; accelerators it does not list keep
    their own.
    """

    zero_stages: list[Literal[0, 1, 2, 3]] | None = Field(
        default=None, description="ZeRO stages the stack implements (a search tries only these); none: all"
    )
    recompute_modes: list[Literal["none", "selective", "full"]] | None = Field(
        default=None, description="activation recomputation modes the stack implements; none: all"
    )
    zero_with_pipeline: bool = Field(
        default=False,
        description="ZeRO stages 2 and 3 combine with pipeline parallelism (FSDP-style sharding per stage); "
        "false: as Megatron-LM and DeepSpeed, a search pairs them with pp = 1 only",
    )
    matmul_efficiency: dict[str, dict[Dtype, Fraction]] | None = Field(
        default=None,
        description="accelerator id -> dtype -> large-GEMM efficiency measured in training "
        "with this stack [fraction of the dense peak]; replaces the accelerator's "
        "(calibration)",
    )

    _calibrations: ClassVar[tuple[str, ...]] = ("matmul_efficiency",)


class Storage(Entry):
    """A parallel file system or object store, sized in purchasable (or provisionable) units: what one
    unit holds and delivers, and what it costs and draws. ``data/storage/<id>.yaml``."""

    kind: Literal["parallel-file-system", "object-store"] = Field(
        description="POSIX parallel file system or object store"
    )
    unit: str = Field(min_length=3, description="what one unit is (a 2U appliance, 1 TiB provisioned, ...)")
    capacity_tb_per_unit: Positive = Field(description="usable capacity of one unit [TB, 1e12 bytes]")
    read_GBps_per_unit: Positive = Field(description="sustained sequential read bandwidth of one unit [GB/s]")
    write_GBps_per_unit: Positive = Field(description="sustained sequential write bandwidth of one unit [GB/s]")
    read_iops_per_unit: Positive = Field(description="random read operations per second of one unit [1/s]")
    iops_io_kib: Positive = Field(default=4.0, description="I/O size the IOPS figure is stated at [KiB]")
    power_w_per_unit: NonNegative = Field(
        description="typical power of one unit [W] (0 for a cloud service, whose power is in its price)"
    )
    usd_per_unit: NonNegative = Field(
        default=0.0, description="purchase price of one unit [US dollars] (0 for a service)"
    )
    usd_per_unit_month: NonNegative = Field(
        default=0.0, description="service or support price of one unit per month [US dollars]"
    )
    price_as_of: _dt.date | None = Field(default=None, description="date of the prices (YYYY-MM-DD)")


class ServingEngine(Entry):
    """A serving engine's scheduler limits and per-iteration costs, as the inference planner applies them.

    ``max_num_seqs`` caps the concurrent sequences of one scheduler (one attention group: a replica, or
    one data-parallel attention rank with expert parallelism) below what the KV cache holds;
    ``max_num_batched_tokens`` is the token budget of one iteration (the prefill chunk with chunked
    prefill); ``iteration_overhead_s`` is host time per iteration the GPU waits for (scheduling,
    sampling, input preparation) that the engine does not overlap with the forward pass.
    """

    max_num_seqs: PosInt = Field(description="most concurrent sequences one scheduler runs [-]")
    max_num_batched_tokens: PosInt = Field(
        description="token budget of one iteration; the prefill chunk when chunked_prefill [tokens]"
    )
    chunked_prefill: bool = Field(description="prompts are split into chunks batched with decodes (Sarathi-Serve)")
    memory_utilization: Fraction = Field(
        description="fraction of device memory the engine sizes itself from (vLLM gpu_memory_utilization, "
        "SGLang mem_fraction_static, TensorRT-LLM free_gpu_memory_fraction)"
    )
    memory_rule: Literal["total", "free"] = Field(
        default="total",
        description="total: the fraction of the visible HBM holds weights, workspace and KV "
        "(vLLM, SGLang); free: the KV cache takes the fraction of what is free after "
        "weights, workspace and overheads (TensorRT-LLM)",
    )
    iteration_overhead_s: NonNegative = Field(
        description="host time per iteration not overlapped with the GPU (scheduler, sampling, inputs) [s]"
    )
    weight_dtypes: list[Dtype] = Field(min_length=1, description="weight / GEMM dtypes the engine serves")
    kv_dtypes: list[Dtype] = Field(min_length=1, description="KV-cache dtypes the engine supports")
    dequant_overhead: dict[Dtype, NonNegative] = Field(
        default_factory=dict,
        description="dtype -> extra fraction of the GEMM-and-attention time per pass for "
        "(de)quantisation not fused into the kernels [-]; absent: 0",
    )


KINDS: dict[str, type[Entry]] = {
    "accelerators": Accelerator,
    "interconnects": Interconnect,
    "switches": Switch,
    "systems": System,
    "models": Model,
    "stacks": SoftwareStack,
    "storage": Storage,
    "engines": ServingEngine,
}


# -- cluster job mixes (issue 14) ----------------------------------------------------------------
class Distribution(_Strict):
    """A discrete distribution (``values`` with ``weights``) or a log-normal (``mu``, ``sigma`` of the
    natural log of the quantity), with its source."""

    kind: Literal["discrete", "lognormal"]
    values: list[float] | None = None
    weights: list[Annotated[float, Field(ge=0.0)]] | None = None
    mu: float | None = Field(default=None, description="mean of ln(x), x in the mix's unit")
    sigma: NonNegative | None = Field(default=None, description="standard deviation of ln(x)")
    max: Positive | None = Field(default=None, description="draws above this are cut to it (a run-time limit)")
    unit: str = Field(min_length=1)
    source: Source
    assumption: bool = False

    @field_validator("source")
    @classmethod
    def _src(cls, v):
        return _check_source(v)

    @model_validator(mode="after")
    def _shape(self):
        if self.kind == "discrete":
            if not self.values or not self.weights or len(self.values) != len(self.weights) or sum(self.weights) <= 0:
                raise ValueError("a discrete distribution needs values and weights of equal, non-zero length")
        elif self.mu is None or self.sigma is None:
            raise ValueError("a lognormal distribution needs mu and sigma")
        return self


class JobClassMix(_Strict):
    """One priority class of a synthetic job mix."""

    cls: Literal["inference", "training", "fine-tuning", "development"]
    share: SourcedValue = Field(description="fraction of submitted jobs in this class")
    gpus: Distribution = Field(description="whole GPUs per job [GPU]")
    fractional: SourcedValue | None = Field(
        default=None, description="probability that a 1-GPU job asks for a share of a GPU"
    )
    gpu_milli: Distribution | None = Field(default=None, description="share of the GPU of a fractional job [milli-GPU]")
    duration_s: Distribution = Field(description="run time on an ideal allocation [s]")
    checkpoint_s: SourcedValue = Field(description="checkpoint period [s]; 0 = stateless, a negative value = never")
    tp_gpus: PosInt = Field(default=1, description="tensor/expert-parallel group that must share a scale-up domain")


class ClusterMix(Entry):
    """A synthetic job mix for the cluster simulation (``data/cluster_mixes/<id>.yaml``)."""

    offered_load: SourcedValue = Field(
        description="offered GPU demand as a fraction of the cluster's GPUs (sets the arrival rate)"
    )
    classes: list[JobClassMix] = Field(min_length=1)
    fgd_workload: str | None = Field(default=None, description="notes on the workload FGD targets")
