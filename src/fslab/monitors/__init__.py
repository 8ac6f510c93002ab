"""Measurements taken around a run's measured phase: system-wide CPU (cpu.py), the traffic of the
devices under the target (traffic.py), the space the filesystem uses and its compression
(space.py), and the extents of files (extents.py). All behind one small protocol (base.py).
"""
