"""Tutoring tools: courses, learners, enrollments and grades in the executor's own SQLite
database (``data/tutoring.db``, seeded on first start).

These functions run in the executor process (``executor/server.py``), not in Charter.
Charter builds their contracts from the same ``@charter.tool`` declarations, so the Build's
contract digests equal what the executor describes — change one without the other and
``charter check`` shows the tool as not ready.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

import charter
from charter.errors import InvalidInput

ROOT = Path(__file__).resolve().parent.parent
COURSES = [
    ("alg-1", "Algebra I", "math", "Linear equations, inequalities and graphs."),
    ("geo-1", "Geometry", "math", "Angles, triangles, circles and proofs."),
    ("bio-1", "Biology", "science", "Cells, genetics and ecosystems."),
    ("chem-1", "Chemistry", "science", "Atoms, bonds and reactions."),
    ("lit-1", "World Literature", "english", "Novels and poems from five continents."),
]
LEARNERS = [("l-ada", "Ada"), ("l-ben", "Ben"), ("l-chloe", "Chloé")]
ENROLLMENTS = [("l-ada", "alg-1", "B"), ("l-ada", "bio-1", "A"), ("l-ben", "geo-1", None)]
GRADES = ("A", "B", "C", "D", "F", "incomplete")


def database() -> Path:
    return Path(os.environ.get("TUTORING_DB", ROOT / "data" / "tutoring.db"))


def connect() -> sqlite3.Connection:
    path = database()
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30)
    db.row_factory = sqlite3.Row
    return db


def seed() -> None:
    """Create and fill the database on first start (idempotent)."""
    with connect() as db:
        db.executescript(
            "CREATE TABLE IF NOT EXISTS courses (id TEXT PRIMARY KEY, title TEXT NOT NULL,"
            " subject TEXT NOT NULL, summary TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS learners (id TEXT PRIMARY KEY, name TEXT NOT NULL);"
            "CREATE TABLE IF NOT EXISTS enrollments (learner_id TEXT NOT NULL,"
            " course_id TEXT NOT NULL, grade TEXT, PRIMARY KEY (learner_id, course_id));"
            "CREATE TABLE IF NOT EXISTS grade_changes (idempotency_key TEXT PRIMARY KEY,"
            " learner_id TEXT, course_id TEXT, old TEXT, new TEXT, reason TEXT);"
        )
        db.executemany("INSERT OR IGNORE INTO courses VALUES (?, ?, ?, ?)", COURSES)
        db.executemany("INSERT OR IGNORE INTO learners VALUES (?, ?)", LEARNERS)
        db.executemany("INSERT OR IGNORE INTO enrollments VALUES (?, ?, ?)", ENROLLMENTS)


def _learner(db: sqlite3.Connection, learner_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = db.execute(
        "SELECT * FROM learners WHERE id = ?", (learner_id,)
    ).fetchone()
    if row is None:
        raise InvalidInput("no such learner", reason="LEARNER_UNKNOWN")
    return row


@charter.tool("courses.search", permissions=["courses:read"])
def search_courses(
    query: Annotated[str, Field(max_length=100)] = "",
    subject: Annotated[str | None, Field(max_length=40)] = None,
    limit: Annotated[int, Field(ge=1, le=20)] = 5,
) -> dict[str, Any]:
    """Find courses whose title or summary contains the query, optionally in one subject."""
    with connect() as db:
        rows = db.execute(
            "SELECT * FROM courses WHERE (title LIKE ?1 OR summary LIKE ?1)"
            " AND (?2 IS NULL OR subject = ?2) ORDER BY id LIMIT ?3",
            (f"%{query}%", subject, limit),
        ).fetchall()
    return {"courses": [dict(r) for r in rows]}


@charter.tool("learners.progress", permissions=["learners:read"])
def learner_progress(learner_id: Annotated[str, Field(max_length=40)]) -> dict[str, Any]:
    """A learner's enrollments and grades."""
    with connect() as db:
        learner = _learner(db, learner_id)
        rows = db.execute(
            "SELECT e.course_id, c.title, e.grade FROM enrollments e"
            " JOIN courses c ON c.id = e.course_id WHERE e.learner_id = ? ORDER BY e.course_id",
            (learner_id,),
        ).fetchall()
    return {"learner": dict(learner), "enrollments": [dict(r) for r in rows]}


@charter.tool(
    "enrollments.create",
    effect="write",
    permissions=["enrollments:write"],
    danger="medium",
)
def enroll(
    learner_id: Annotated[str, Field(max_length=40)],
    course_id: Annotated[str, Field(max_length=40)],
) -> dict[str, Any]:
    """Enroll a learner in a course. Needs a teacher's approval; happens at most once."""
    with connect() as db:
        _learner(db, learner_id)
        if db.execute("SELECT 1 FROM courses WHERE id = ?", (course_id,)).fetchone() is None:
            raise InvalidInput("no such course", reason="COURSE_UNKNOWN")
        created = db.execute(
            "INSERT OR IGNORE INTO enrollments VALUES (?, ?, NULL)", (learner_id, course_id)
        ).rowcount
    return {"learner_id": learner_id, "course_id": course_id, "created": bool(created)}


@charter.tool(
    "grades.change",
    effect="write",
    permissions=["grades:write"],
    danger="high",
)
def change_grade(
    learner_id: Annotated[str, Field(max_length=40)],
    course_id: Annotated[str, Field(max_length=40)],
    grade: Annotated[str, Field(pattern="^(A|B|C|D|F|incomplete)$")],
    reason: Annotated[str, Field(min_length=3, max_length=500)],
    ctx: charter.Context,
) -> dict[str, Any]:
    """Change a learner's grade in one course, with a reason. Needs a teacher's approval."""
    with connect() as db:
        row = db.execute(
            "SELECT grade FROM enrollments WHERE learner_id = ? AND course_id = ?",
            (learner_id, course_id),
        ).fetchone()
        if row is None:
            raise InvalidInput("the learner is not enrolled in that course", reason="NOT_ENROLLED")
        # The idempotency key makes the change happen once even if the call arrives twice.
        db.execute(
            "INSERT OR IGNORE INTO grade_changes VALUES (?, ?, ?, ?, ?, ?)",
            (ctx.idempotency_key, learner_id, course_id, row["grade"], grade, reason),
        )
        db.execute(
            "UPDATE enrollments SET grade = ? WHERE learner_id = ? AND course_id = ?",
            (grade, learner_id, course_id),
        )
    return {"learner_id": learner_id, "course_id": course_id, "old": row["grade"], "new": grade}
