"""Helpers of the side-by-side benchmark harness (run by ``benchmarks/run.py``)."""
