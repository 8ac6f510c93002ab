"""Storage layers between a target's devices and a filesystem (base.py: the machinery)."""

from fslab.devices.layers.base import LAYERS, Layer, Stack, built, missing

__all__ = ["LAYERS", "Layer", "Stack", "built", "missing"]
