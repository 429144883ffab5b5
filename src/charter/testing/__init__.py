"""The public test kit: a fake clock and fixed ids, ledger scenarios, ``raises``, and the
conformance suites every store, artifact store, registry and conversation store must pass
(plain classes; ``docs/architecture.md`` says how ``tests/conformance.py`` runs them)."""
