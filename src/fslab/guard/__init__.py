"""The guard: every path from untrusted input — a study file, a job file, the command line, the
journal — to a tool, a file, a device or a signal goes through here.

- names.py       names (study, target, workload) checked, and turned into file and kernel names
- identity.py    proof that a file, loop device, mount or process is the very one fslab made
- options.py     the allow-lists through which options reach mkfs, mount, zpool/zfs, mdadm, …
- fio/help.py, fio/table.py  fio's own table of its options: read from what fio says, kept per fio version
- fio/options.py fio options checked against that table; what reaches outside refused, with why
- fio/jobs.py    fio job files: parsed, every option checked, written out again by fslab
- block_devices.py  a user's block device: confirmed on the command line, refused when in use
"""

# The flag with which a user confirms a block device of theirs may be wiped (block_devices.py): here,
# so that the command line names it without loading the checks behind it (every command starts sooner).
DESTROY_FLAG = "--destroy-data"
