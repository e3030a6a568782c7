# Benchmarks of the reliability and performance harness (see bench/run_all.py).
PY ?= .venv/bin/python

.PHONY: bench bench-quick bench-report

bench:          ## every benchmark at full size (~8 min on 2 cores), then bench/REPORT.md
	$(PY) bench/run_all.py

bench-quick:    ## the same steps at small sizes (a few minutes)
	$(PY) bench/run_all.py --quick

bench-report:   ## rebuild bench/REPORT.md and its plots from bench/results
	$(PY) bench/run_all.py --report-only
