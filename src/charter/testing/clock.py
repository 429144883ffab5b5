"""A fake clock: every reading is ``step`` later than the one before (deterministic times)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(
        self,
        start: datetime = datetime(2025, 1, 1, tzinfo=UTC),
        *,
        step: timedelta = timedelta(milliseconds=1),
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("the fake clock needs a timezone-aware start")
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        current = self.now
        self.now = current + self.step
        return current

    def advance(self, delta: timedelta) -> None:
        self.now += delta
