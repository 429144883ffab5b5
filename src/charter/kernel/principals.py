"""Principals: who is calling, on behalf of which tenant, with which permissions.

A principal is either an ``application`` (the program that runs an agent) or an ``operator``
(a human). Only operators holding :data:`APPROVER_PERMISSION` may approve; application
credentials can never approve, whatever permissions they list (SEIF point 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

APPROVER_PERMISSION = "approvals:approve"
WILDCARD = "*"


class PrincipalKind(StrEnum):
    APPLICATION = "application"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """An authenticated caller. Carries no credential: keys stay in the deployment."""

    name: str
    tenant: str
    kind: PrincipalKind
    permissions: frozenset[str]
    roles: frozenset[str] = frozenset()

    def has(self, permission: str) -> bool:
        """True if ``permission`` is granted exactly, or by a wildcard grant.

        A grant ``ns:*`` covers every permission under ``ns:`` at any depth
        (``notes:*`` covers ``notes:write`` and ``notes:items:write``); the grant ``*`` covers
        everything. A required permission that itself contains ``*`` matches only the same
        grant, exactly.
        """
        if permission in self.permissions or WILDCARD in self.permissions:
            return True
        if not permission or WILDCARD in permission:
            return False
        parts = permission.split(":")
        return any(
            ":".join(parts[:depth]) + ":*" in self.permissions for depth in range(1, len(parts))
        )

    @property
    def is_operator(self) -> bool:
        return self.kind is PrincipalKind.OPERATOR

    @property
    def can_approve(self) -> bool:
        """Operators holding the approver permission; never an application."""
        return self.is_operator and self.has(APPROVER_PERMISSION)
