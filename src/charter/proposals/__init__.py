"""Proposals: what ``proposal``-effect tools produce instead of a mutation (DESIGN §2).

The record and its lifecycle are a ledger projection
(:mod:`charter.ledger.proposals_projection`); :class:`ProposalService` creates them from a
tool's draft, lets operators approve or reject them, and applies one through the kernel.
"""

from charter.proposals.diff import graph_diff, json_diff
from charter.proposals.service import (
    ProposalKind,
    ProposalService,
    ProposalSettings,
    draft_from_result,
    load_proposal_settings,
)

__all__ = [
    "ProposalKind",
    "ProposalService",
    "ProposalSettings",
    "draft_from_result",
    "graph_diff",
    "json_diff",
    "load_proposal_settings",
]
