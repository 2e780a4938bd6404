"""Hardware kinds: systems and storage (accelerators, interconnects, switches and the bounds of hardware
figures: :mod:`hnplan.catalog.schemas.devices`, re-exported here)."""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from hnplan.catalog.schemas.base import Entry, Fraction, NonNegative, PosInt, Positive
from hnplan.catalog.schemas.devices import (  # noqa: F401 - the devices and the bounds re-exported
    MAX_CAPACITY_TB,
    MAX_GPUS_PER_BLOCK,
    MAX_HBM_GB,
    MAX_HBM_TBPS,
    MAX_HOST_MEMORY_GIB,
    MAX_LINK_GBPS,
    MAX_NICS_PER_NODE,
    MAX_POWER_W,
    MAX_TFLOPS,
    MAX_UNIT_POWER_KW,
    MIN_CAPACITY_TB,
    MIN_HBM_GB,
    MIN_HBM_TBPS,
    MIN_LINK_GBPS,
    MIN_POWER_W,
    MIN_STORAGE_GBPS,
    MIN_TFLOPS,
    MIN_UNIT_POWER_KW,
    Accelerator,
    BlockGpus,
    Interconnect,
    LinkRate,
    StorageRate,
    Switch,
    Tflops,
)
from hnplan.catalog.schemas.plausibility import unit_power_problem, unit_price_problem


class System(Entry):
    """A building block (8-GPU server, NVL72 rack, supernode) and the networks that join them."""

    kind: Literal["server-cluster", "supernode"] = Field(
        description="server-cluster: small scale-up domain joined by a switched network; supernode: large scale-up domain"
    )
    accelerator: str = Field(description="accelerator id")
    node_gpus: BlockGpus = Field(description="accelerators per node (server or compute tray)")
    scaleup_domain_gpus: BlockGpus = Field(description="accelerators in one scale-up (NVLink/UB) domain")
    scaleup_fabric: str = Field(description="interconnect id of the scale-up domain")
    scaleup_topology: Literal["switched", "full-mesh", "torus-2d", "torus-3d", "clos"] = Field(
        description="shape of the scale-up domain"
    )
    scaleup_bw_GBps_per_dir: LinkRate | None = Field(
        default=None,
        description="per-accelerator scale-up bandwidth [GB/s per direction] if it differs from the accelerator's",
    )
    scaleup_switch: str | None = Field(default=None, description="switch id inside the domain")
    scaleup_switches_per_domain: NonNegative | None = Field(default=None, description="switch chips per domain")
    scaleout_fabric: str = Field(description="interconnect id of the scale-out network")
    nics_per_node: Annotated[int, Field(gt=0, le=MAX_NICS_PER_NODE)] = Field(
        description="scale-out NICs per node (compute network only)"
    )
    nic_gbps: LinkRate = Field(description="line rate of one scale-out NIC [Gb/s] per direction")
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
    scaleout_ring_nics_per_domain: PosInt | None = Field(
        default=None,
        description="NICs of one scale-up domain that the collective library's rings and trees leave and "
        "enter the domain through (each ring flow crosses a domain boundary through one NIC; NCCL's "
        "graph search on a multi-node NVLink domain uses fewer NICs than the domain has); default "
        "every NIC of the group's accelerators (calibration)",
    )
    unit_gpus: BlockGpus = Field(description="accelerators in one purchasable unit (server, rack or supernode)")
    unit_power_kw: Annotated[float, Field(ge=MIN_UNIT_POWER_KW, le=MAX_UNIT_POWER_KW)] = Field(
        description="IT power of one unit at full load [kW], incl. hosts, NICs and scale-up switches"
    )
    gpus_per_rack: BlockGpus = Field(
        description="accelerators per rack, averaged over compute and in-domain network racks"
    )
    cooling: Literal["air", "liquid"] = Field(description="selects the facility's PUE default")
    host_memory_gib_per_node: Annotated[float, Field(ge=MIN_HBM_GB, le=MAX_HOST_MEMORY_GIB)] | None = Field(
        default=None,
        description="host DDR/LPDDR per node [GiB, 2**30 bytes]: datasheets' 'TB'/'GB' of DRAM are binary "
        "(JEDEC JESD100B.01), so a '2 TB' server of 32 x 64 GB DIMMs holds 2,048 GiB",
    )
    host_link_GBps_per_gpu: LinkRate | None = Field(
        default=None, description="accelerator <-> host memory bandwidth per accelerator [GB/s per direction]"
    )
    host_link_kind: Literal["pcie", "nvlink-c2c"] = Field(
        default="pcie", description="link between accelerator and host memory (PCIe, or a chip-to-chip NVLink-C2C)"
    )
    host_dispatch_factor: Positive | None = Field(
        default=None,
        description="host time of one framework call (Python, the PyTorch dispatcher, the launch) on this "
        "system's host CPU over that on the x86 servers the stacks' kernel_launch_us was measured on [-]; "
        "scales kernel_launch_us; absent: 1, an x86 host (calibration)",
    )
    pooled_memory_tb: Annotated[float, Field(ge=MIN_CAPACITY_TB, le=MAX_CAPACITY_TB)] | None = Field(
        default=None, description="memory pool shared by a domain (CXL) [TB, 1e12 bytes]"
    )
    pooled_memory_GBps_per_gpu: LinkRate | None = Field(
        default=None, description="bandwidth from one accelerator to the pooled memory [GB/s per direction]"
    )
    pooled_memory_nodes: PosInt | None = Field(
        default=None,
        description="nodes sharing the pool (a CXL switch or fabric-attached memory); default the scale-up domain's",
    )
    pooled_memory_latency_ns: Positive | None = Field(
        default=None, description="load latency of the pooled memory [ns]"
    )
    nvme_tb_per_node: Annotated[float, Field(ge=MIN_CAPACITY_TB, le=MAX_CAPACITY_TB)] | None = Field(
        default=None, description="local NVMe per node [TB]"
    )
    nvme_read_GBps_per_node: StorageRate | None = Field(
        default=None, description="aggregate sequential read bandwidth of the local NVMe drives of a node [GB/s]"
    )
    storage_write_GBps_per_node: StorageRate | None = Field(
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
    # -- storage and memory pool ---------------------------------------------------------------
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
    # -- a price of its own : a system file outside data/ can be costed -------------------
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

    _calibrations: ClassVar[tuple[str, ...]] = (
        "scaleup_inr_efficiency",
        "scaleout_ring_nics_per_domain",
        "host_dispatch_factor",
    )

    @model_validator(mode="after")
    def _shapes(self):
        if self.scaleup_domain_gpus % self.node_gpus:
            raise ValueError(
                f"scaleup_domain_gpus ({self.scaleup_domain_gpus}) must be a multiple of node_gpus ({self.node_gpus})"
            )
        domain_nics = self.scaleup_domain_gpus // self.node_gpus * self.nics_per_node
        if self.scaleout_ring_nics_per_domain is not None and self.scaleout_ring_nics_per_domain > domain_nics:
            raise ValueError(
                f"scaleout_ring_nics_per_domain ({self.scaleout_ring_nics_per_domain}) exceeds the NICs of one "
                f"scale-up domain ({domain_nics} = {self.scaleup_domain_gpus // self.node_gpus} nodes x "
                f"{self.nics_per_node})"
            )
        if problem := unit_price_problem(self.unit_price_usd, self.unit_gpus):
            raise ValueError(problem)
        if problem := unit_power_problem(self.unit_power_kw, self.unit_gpus):
            raise ValueError(problem)
        return self


class Storage(Entry):
    """A parallel file system or object store, sized in purchasable (or provisionable) units: what one
    unit holds and delivers, and what it costs and draws. ``data/storage/<id>.yaml``."""

    kind: Literal["parallel-file-system", "object-store"] = Field(
        description="POSIX parallel file system or object store"
    )
    unit: str = Field(min_length=3, description="what one unit is (a 2U appliance, 1 TiB provisioned, ...)")
    capacity_tb_per_unit: Annotated[float, Field(ge=MIN_CAPACITY_TB)] = Field(
        description="usable capacity of one unit [TB, 1e12 bytes]"
    )
    read_GBps_per_unit: StorageRate = Field(description="sustained sequential read bandwidth of one unit [GB/s]")
    write_GBps_per_unit: StorageRate = Field(description="sustained sequential write bandwidth of one unit [GB/s]")
    read_iops_per_unit: Annotated[float, Field(ge=1.0)] = Field(  # floor: one operation a second
        description="random read operations per second of one unit [1/s]"
    )
    iops_io_kib: Annotated[float, Field(ge=0.5)] = Field(  # floor: one 512-byte sector
        default=4.0, description="I/O size the IOPS figure is stated at [KiB]"
    )
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
