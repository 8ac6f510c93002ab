"""Short studies tests share: the zfs-fuse tests' (its daemon, its turns: one 16 MiB fio write of 1 s
a run, on 256 MiB sparse images — what it takes to make a pool, run, and destroy it, and little
more), and the plan of a stack that --skip-unsupported skips."""


def short_study(name: str, targets: str, repetitions: int = 2) -> str:
    """A study named `name` of seq_write on `targets` (their [[target]] tables, as TOML)."""
    return f"""\
[study]
name = "{name}"
repetitions = {repetitions}
workloads = ["seq_write"]
image_size = "256MiB"
image_fill = "sparse"

[fio]
size = "16MiB"
runtime = "1s"

{targets}"""


# A stack on md (raw baselines beside it) and a plain target: on a machine without md, or one
# made to look so, `--skip-unsupported` skips the stack and its raw baselines with it.
SKIPPED_STACK = """\
[study]
name = "skipped-stack"
workloads = ["rand_read"]
image_size = "2GiB"

[[target]]
name = "stack"
filesystem = "ext4"
devices = 2
layers = ["md-raid1"]
raw_baseline = true

[[target]]
name = "plain"
filesystem = "ext4"
"""


def mixed_scenario(repetitions: int) -> str:
    """A scenario whose phases are fio, sysbench and dd, on ext4: what every phase tool offers."""
    return f"""\
[study]
name = "mix"
repetitions = {repetitions}
image_size = "512MiB"

[[target]]
filesystem = "ext4"

[[workload]]
name = "mix"
kind = "scenario"
size = "32MiB"
data = "zeros"

[[workload.phase]]
name = "fill"
fio = {{ rw = "write", bs = "1m", end_fsync = 1 }}

[[workload.phase]]
name = "mail"
sysbench = {{ "file-num" = 8, "file-total-size" = "512K", time = 1 }}

[[workload.phase]]
name = "sanity"
dd = {{ bs = "1M", count = 32 }}
"""
