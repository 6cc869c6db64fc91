"""Benchmarks and measurements (see scripts/README.md)."""
