"""Write a remote executor: ``charter.remote.app`` serves ``@charter.tool`` functions over
``charter.executor.v1`` (``GET /describe``, ``POST /execute``) with signed requests and a
durable idempotency journal. Needs the ``server`` extra (Starlette). See
``docs/executors.md``.

    import charter, charter.remote

    @charter.tool("courses.search")
    def search(query: str) -> dict: ...

    app = charter.remote.app([search], name="tutoring", version="1.0.0")
"""

from charter.executors.http_protocol import PROTOCOL
from charter.remote._app import app
from charter.remote._journal import Journal

__all__ = ["PROTOCOL", "Journal", "app"]
