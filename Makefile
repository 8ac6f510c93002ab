# fslab — `make demo` runs the built-in quick study; `make test` runs the test suite.
# Both install what they need first (Debian packages, then a virtual environment), idempotently.
# Run as root: fslab formats and mounts loop images.

SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

# Tools fslab drives, and what it needs to build its Python environment; then what the layer
# tests need: mdadm, cryptsetup, LVM, and a QEMU guest with Debian's kernel, which has md and
# device-mapper where the host's kernel may not (tests/guest.py); and the browser the report page
# is tested in (Debian's chromium, driven by playwright: no browser is downloaded), with a font;
# fuse2fs: a FUSE filesystem to test what filefrag cannot count through FUSE (zfs-fuse's case);
# PostgreSQL: the tests start a server of their own for the shared results database;
# bpftrace, perf, bcc's tools and blktrace: what the kernel did with a run's I/O (--trace).
DEBIAN_PACKAGES := fio sysbench e2fsprogs fuse2fs xfsprogs btrfs-progs zfs-fuse rsync util-linux procps kmod \
                   bpftrace linux-perf bpfcc-tools blktrace \
                   mdadm cryptsetup lvm2 fdisk python3 python3-venv python3-pip \
                   qemu-system-x86 linux-image-amd64 busybox-static cpio chromium fonts-dejavu-core postgresql

.PHONY: setup system-packages demo test test-long check gate bench clean

setup: system-packages $(STAMP)

system-packages:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:" $$missing; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# pip byte-compiles one file after another (half the set-up's time); compileall does it on every
# core. Compiled ahead, not on first import: the QEMU guests of the tests import from this very
# environment, where compiling costs ten times the CPU. mypy's cache (.mypy_cache) is made here
# too, its findings left to the gate: without it, a fresh clone's first gate took 22 s (16 s of
# CPU) of make check's minute; with it, a second.
$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q --no-compile -e '.[test]'
	$(PYTHON) -m compileall -q -j 0 $(VENV)/lib src > /dev/null
	$(VENV)/bin/mypy > /dev/null || true
	rm -f $(VENV)/.installed-* && touch $@

demo: setup
	$(VENV)/bin/fslab run quick --decide --max-runs 6 --time-budget 4m
	$(VENV)/bin/fslab report

# The gate, before any test (check and test both start with it): the code as the formatter writes
# it and without the linter's findings (pyproject.toml's [tool.ruff]), then type-checked (its
# [tool.mypy]), over src, tests and bench: a second or two, with mypy's cache (.mypy_cache, made
# by setup; without it 16 s of CPU more). A checker more is a line more here.
CHECKED := src tests bench
gate: $(STAMP)
	$(VENV)/bin/ruff format --check $(CHECKED)
	$(VENV)/bin/ruff check $(CHECKED)
	$(VENV)/bin/mypy

# The inner loop: the gate, then the tests that need no root, device, guest or browser (statistics,
# parsing, the guard's refusals, reports of stored samples, the commands run in-process), as any
# user, in under a minute. Python only: the virtual environment, no Debian package.
# Two workers on two cores, each busy throughout: the wall time is about the CPU time halved (1,861
# tests: 139 s of CPU, 69.5 s on the quiet machine), so CPU is what is cut. Measured in alternate
# runs beside other helpers (load 6-15): 140 s of CPU before, 120 s after the cuts of 2026-11-30
# (about 60 s quiet, not measured quiet). A third of it is drawing figures (test_report_html,
# test_history: vl-convert's renderer processes, 0.7 s of CPU each to start) and the bench scripts'
# runs (test_bench); no other module takes 7 s. pytest keeps the test modules it rewrites for
# their asserts (tests/__pycache__) even where the environment says not to write bytecode
# (PYTHONDONTWRITEBYTECODE): rewriting them all anew cost each worker 6.5 s of CPU before its
# first test (9.8 s to collect, 3.2 s with them kept).
check: gate
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/pytest -q -n 2 --dist loadgroup --no-loadscope-reorder -m "not root and not guest and not browser and not slow"

# The OpenZFS kernel-module tests need OpenZFS built for the guest's kernel (once, a few minutes:
# the kernel lab's own build, fslab.lab.openzfs, into /var/cache/fslab/openzfs/<release>).
# Three workers (pytest-xdist) on two cores: much of a test's time is waiting on fio's timed runs,
# mkfs, mount and the disk, and the QEMU guests boot in the background from the start, on a core
# of their own most of the time (two workers: 10:05; three: 8:13 here); the groups (one per
# module, zfs-fuse's, the lab's boots, the guests') and the order they are handed out in are in
# tests/conftest.py.
# Tests of many lab VM boots or whole studies in one (long: make test-long) are left out.
# PYTHONDONTWRITEBYTECODE cleared for pytest: with it set, each worker rewrites the asserts of
# every test module again (~6 s of CPU a worker, 3 workers); without, they are kept in
# tests/__pycache__ (ignored by git) from the first run on.
test: setup gate
	cd tests && ../$(PYTHON) -c 'from guest import guest_kernel; from fslab.lab import openzfs; openzfs.prepare(guest_kernel()[1].name)'
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/pytest -n 3 --dist loadgroup --no-loadscope-reorder -m "not long"

# The long lab tests (fslab bisect over six kernel packages, ~10 min under TCG here; nas-stack and
# btrfs-vs-zfs whole on a kernel, tens of minutes), left out of `make test`'s budget.
test-long: setup gate
	$(VENV)/bin/pytest -m long -s

# The speed and memory targets, measured (at length: not in a test). Each script's --smoke runs the
# same code at tiny sizes in seconds and judges nothing: tests/test_bench.py runs those.
bench: setup
	$(PYTHON) bench/startup.py
	$(PYTHON) bench/fidelity.py
	$(PYTHON) bench/overhead.py
	$(PYTHON) bench/zfs_overhead.py --compare
	$(PYTHON) bench/adaptive.py
	$(PYTHON) bench/paired.py
	$(PYTHON) bench/monitors.py
	$(PYTHON) bench/report_scale.py
	$(PYTHON) bench/study_validation.py
	$(PYTHON) bench/parse_only.py
	$(PYTHON) bench/lab_boot.py
	$(PYTHON) bench/fleet_scale.py  # then bench/pg_scale.py

clean:
	rm -rf $(VENV) reports fslab.db fslab.db-wal fslab.db-shm
