"""Executors: what actually runs a tool once the kernel has decided it may run.

One interface (:mod:`charter.kernel.executor_port`), several implementations: in-process Python
callables (:mod:`charter.executors.python`) and a separate worker process per call
(:mod:`charter.executors.subprocess`). Remote HTTP and downstream MCP executors implement the
same interface. This package re-exports nothing.
"""
