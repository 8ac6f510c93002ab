"""The kernel lab: studies run in throwaway VMs booted from Debian's kernel packages.

kernels.py fetches and unpacks a kernel package into /var/cache/fslab/kernels; vm.py boots it under
QEMU over a curated, read-only view of the host's root; study.py runs a study's plan on each kernel
asked (`fslab run --kernel`) and stores every run in the host's database as a run of that kernel's
host (model.Host, its accelerator recorded); bisect.py finds the first package where a cell's metric
changes (`fslab bisect`); hygiene.py records and, asked, tunes what disturbs VMs (`--tune-host`).
"""
