"""The governed call path: attribution, authorization, budgets, validation, idempotency,
approvals, intent before dispatch, acceptance and outcome (DESIGN §3).

Implementation lives in the submodules; this package re-exports nothing.
"""
