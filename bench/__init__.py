"""Benchmarks (never timed tests); see bench/README.md."""
