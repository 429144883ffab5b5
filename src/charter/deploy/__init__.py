"""Deployment: the deployment file, secret references, and executor readiness."""
