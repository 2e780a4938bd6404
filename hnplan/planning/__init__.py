"""Planners: the only orchestrators over the cost models (training, design comparison)."""
