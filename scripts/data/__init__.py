"""Dataset generators and the derived training data (see scripts/README.md)."""
