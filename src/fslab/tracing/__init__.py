"""Opt-in tracing of what the kernel did with a run's I/O: fslab's own fixed bpftrace programs,
parameterised only by numbers fslab checked (device numbers), run in a mount namespace of their
own where tracefs is mounted (namespace.py), held in the journal and removed on every exit
(bpftrace.py); the block layer's program and the pure reading of its output (block.py)."""
