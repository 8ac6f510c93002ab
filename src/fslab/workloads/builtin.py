"""Named workloads a study can use without defining them.

The access pattern is fixed here, and a runtime where the seed's workload has its own (the
video editor's 45 s; backups run until their size is written); size and the rest come from the
study's [fio] table or fslab's defaults (study/__init__.py), and --scale shortens them all at once.
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
    # Seed 000, Section III-D: the video editor, four streams of 1 MiB blocks at queue depth 32.
    "video_read": {"rw": "read", "bs": "1m", "iodepth": 32, "numjobs": 4, "runtime": "45s"},
    "video_write": {"rw": "write", "bs": "1m", "iodepth": 32, "numjobs": 4, "runtime": "45s"},
    # Seed 003: the NAS. Backups stream 1 MiB blocks, one job, as long as the size takes (caches
    # are dropped before every measured run, so the read restores from the device); metadata is
    # 4 KiB random 50/50 by 4 jobs at QD32 on one shared file (the seed's --filename); the mixed
    # load 128 KiB random 60/40 by 4 jobs at QD16.
    "nas_backup_write": {"rw": "write", "bs": "1m", "iodepth": 1, "runtime": "0s"},
    "nas_backup_read": {"rw": "read", "bs": "1m", "iodepth": 1, "runtime": "0s"},
    "nas_metadata": {"rw": "randrw", "rwmixread": 50, "bs": "4k", "iodepth": 32, "numjobs": 4, "shared_file": True},
    "nas_mixed": {"rw": "randrw", "rwmixread": 60, "bs": "128k", "iodepth": 16, "numjobs": 4},
}

WORKLOAD_SETS: dict[str, list[str]] = {
    "baseline": ["seq_read", "seq_write", "rand_read", "rand_write"],
    "crystaldiskmark": [name for name in BUILTIN_WORKLOADS if name[:3] in ("SEQ", "RND")],
    "video-editor": ["video_read", "video_write"],
    "nas": ["nas_backup_write", "nas_backup_read", "nas_metadata", "nas_mixed"],
}
