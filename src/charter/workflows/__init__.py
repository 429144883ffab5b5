"""Catalog workflows and skills, task DAGs, pinned contracts and handoffs (docs/workflows.md)."""
