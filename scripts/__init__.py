"""Rampart's helper scripts, grouped by job (see scripts/README.md).

Run them as modules from the repository root, e.g. `python3 -m scripts.data.gen_embedded --help`;
shared helpers are in scripts/common.py.
"""
