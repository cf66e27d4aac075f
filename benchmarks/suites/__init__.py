"""Throughput and end-to-end comparisons against baselines (``python -m benchmarks --list``)."""
