"""Running a study, above the results and the statistics it plans with: the plan (plan.py: how many
runs, from the statistics of those done), the runner and its resumption, the watch on systematic
failures, the preview of `fslab run --plan`, and what this machine offers (doctor.py, environment.py)."""
