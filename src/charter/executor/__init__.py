"""Write a remote executor: ``charter.executor.app`` serves ``@charter.tool`` functions over
``charter.executor.v1`` (``GET /describe``, ``POST /execute``) with signed requests and a
durable idempotency journal. Needs the ``server`` extra (Starlette). See
``docs/executors.md``.

    import charter, charter.executor

    @charter.tool("courses.search")
    def search(query: str) -> dict: ...

    app = charter.executor.app([search], name="tutoring", version="1.0.0")
"""

from charter.executor._app import app
from charter.executor._journal import Journal
from charter.executors.http_protocol import PROTOCOL

__all__ = ["PROTOCOL", "Journal", "app"]
