"""What runs on a target: fio jobs (built from a study or a user's job file)."""
