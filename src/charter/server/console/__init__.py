"""The operator console at ``/console``: server-rendered pages (Jinja2) made live by the
vendored htmx and its SSE extension. See docs/console.md."""

from charter.server.console.app import create_console

__all__ = ["create_console"]
