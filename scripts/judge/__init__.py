"""The local LLM judge endpoint and its probe (see scripts/README.md)."""
