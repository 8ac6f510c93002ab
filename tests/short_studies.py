"""Short studies the tests of zfs-fuse share (its daemon, its turns): one 16 MiB fio write of 1 s a run, on
256 MiB sparse images — what it takes to make a pool, run, and destroy it, and little more."""


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
