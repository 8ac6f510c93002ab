"""A fleet: test hosts that each run `fslab worker` against the team's PostgreSQL, which is both
the results database and the queue (procrastinate) that hands each host its share of a study run.

  queue.py     the queue: procrastinate in the results database, units, their names and locks
  roster.py    the workers (name, labels, facts, heartbeat) and which ones `--on` names
  units.py     each host's share of a study run: where it stands, the progress table's rows
  lease.py     a unit or block as the worker that took it holds it: a run stored only under it
  worker.py    `fslab worker`: takes its host's units one at a time, runs each through the runner
  versions.py  which units a worker may run when a fleet's fslabs differ: the rule, and its refusal
  hostlock.py  one benchmark at a time on a host, whichever worker of its name: a lock in the database
  dispatch.py  `fslab run --on`: the study run, its units queued, their progress followed
  shared_storage.py  client hosts' workers serve fio while a study run names them
  steady.py    the database away a while: tried again by one rule, every run stored once
  logs.py      what the libraries under a worker log, said in one line each
"""
