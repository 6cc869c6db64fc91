"""Model training, export and calibration (see scripts/README.md)."""
