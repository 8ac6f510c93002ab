"""Named workloads a study can use without defining them.

Only the access pattern is fixed here; size, runtime and the rest come from the study's
[fio] table or fslab's defaults (study.py), so one study can shorten them all at once.
"""

BUILTIN_WORKLOADS: dict[str, dict] = {
    # Seed 000, Table III: the baseline fio tests (direct I/O, queue depth 16).
    "seq_read": {"rw": "read", "bs": "1m", "iodepth": 16},
    "seq_write": {"rw": "write", "bs": "1m", "iodepth": 16},
    "rand_read": {"rw": "randread", "bs": "4k", "iodepth": 16},
    "rand_write": {"rw": "randwrite", "bs": "4k", "iodepth": 16},
    # Seed 001: CrystalDiskMark's default tests (SEQ1M/RND4K at queue depth Q, T threads).
    "SEQ1M_Q8T1_read": {"rw": "read", "bs": "1m", "iodepth": 8},
    "SEQ1M_Q8T1_write": {"rw": "write", "bs": "1m", "iodepth": 8},
    "SEQ1M_Q1T1_read": {"rw": "read", "bs": "1m", "iodepth": 1},
    "SEQ1M_Q1T1_write": {"rw": "write", "bs": "1m", "iodepth": 1},
    "RND4K_Q32T1_read": {"rw": "randread", "bs": "4k", "iodepth": 32},
    "RND4K_Q32T1_write": {"rw": "randwrite", "bs": "4k", "iodepth": 32},
    "RND4K_Q1T1_read": {"rw": "randread", "bs": "4k", "iodepth": 1},
    "RND4K_Q1T1_write": {"rw": "randwrite", "bs": "4k", "iodepth": 1},
}

WORKLOAD_SETS: dict[str, list[str]] = {
    "baseline": ["seq_read", "seq_write", "rand_read", "rand_write"],
    "crystaldiskmark": [name for name in BUILTIN_WORKLOADS if name[:3] in ("SEQ", "RND")],
}
