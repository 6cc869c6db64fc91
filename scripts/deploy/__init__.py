"""The container image and the Kubernetes example: their checks (see docs/deploy.md)."""
