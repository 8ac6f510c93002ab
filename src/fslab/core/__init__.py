"""The primitives, the bottom floor: what every other floor stands on and that knows nothing of a
study — errors, units, the registry shape, names turned into file and kernel names, proof of
identity (a file, loop device, mount, process or block device is the very one fslab made: mountinfo
read here), running commands (system.py, cgroups), the work directory, its journal and scratch
directories, interruption, the cache, and the checks of what this machine offers.

The guard's proof: every path from untrusted input — a study file, a job file, the command line, the
journal — to a tool, a file, a device or a signal goes through names.py, identity.py and
block_devices.py here; the policy (which options may reach a tool) is the model's (model/options.py)
and fio's (fio/options.py).
"""

# The flag with which a user confirms a block device of theirs may be wiped (block_devices.py): here,
# so that the command line names it without loading the checks behind it (every command starts sooner).
DESTROY_FLAG = "--destroy-data"
