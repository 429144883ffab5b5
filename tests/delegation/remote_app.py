"""The executor process of the remote delegation test.

uvicorn tests.delegation.remote_app:app
"""

from __future__ import annotations

import os

import charter.remote
from tests.delegation.remote_tools import team_remote

app = charter.remote.app(
    [team_remote], name="team", version="1.0.0", journal=os.environ["DELEG_JOURNAL"]
)
