"""Everything that knows fio: its option table and values, job files and their rewriting, its
output and histograms, client/server runs, preallocation, steady state, and its workload kind.

- help.py, table.py  fio's own table of its options: read from what fio says, kept per fio version
- values.py          fio's values (sizes, times, block sizes) read as fio reads them
- options.py         fio options checked against that table; what reaches outside refused, with why
- jobs.py            fio job files: parsed, every option checked, written out again by fslab
- preallocation.py   how a job's files are laid out before they are measured
- rewrite.py, space.py  what fslab rewrites in a user's jobs (sizes, times); the room their files take
- workload.py        the fio workload kind (registered with fslab.workloads as it is imported)
- output.py, hist.py fio's JSON output and its latency histograms read; METRICS
- steady.py, epoch.py  steady-state preconditioning; fio's clock in its logs
- clients.py, server.py  one workload driven on several hosts: `fio --client`, `fio --server`
- bench_tree.py      bench-fio's output tree, as `fslab import` reads it
"""
