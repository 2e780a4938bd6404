"""Planners: the only orchestrators over the cost models (training, inference, sizing, procurement,
design comparison, claims audit, memory and roofline tables). See docs/architecture.md."""
