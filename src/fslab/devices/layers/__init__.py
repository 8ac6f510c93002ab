"""Storage layers between a target's devices and a filesystem, one module each (md.py, luks.py,
lvm.py), each joining LAYERS itself; base.py is what they share (the registry, the stack, `built`)."""

from fslab.devices.layers.base import LAYERS, Layer, Stack, built, missing

__all__ = ["LAYERS", "Layer", "Stack", "built", "missing"]
