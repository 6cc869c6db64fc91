"""Checks: what .ci/run calls, and fuzzing (see scripts/README.md)."""
