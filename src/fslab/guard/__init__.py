"""The guard: every path from untrusted input — a study file, a job file, the command line, the
journal — to a tool, a file, a device or a signal goes through here.

- names.py       names (study, target, workload) checked, and turned into file and kernel names
- identity.py    proof that a file, loop device, mount or process is the very one fslab made
- options.py     the allow-lists through which options reach mkfs, mount, zpool/zfs, mdadm, …
- fio_jobs.py    fio options and job files: parsed, allow-listed, written out again by fslab
- block_devices.py  a user's block device: confirmed on the command line, refused when in use
"""
