"""What an error may say about what was typed: never a known secret, never a long value whole.

Every command's error goes through :func:`charter.cli._output.fail`, which scrubs it with
:func:`guarded`: the deployment's secrets (those of ``--project`` / ``--deploy`` on the command
line, else the current directory's, even when the command never opens a runtime — ``charter
runs …`` reads the store alone) and the redactor's patterns are redacted, and a typed value
longer than :data:`~charter.contracts.text.SHOWN` characters is cut to that prefix (redacted
first, so a secret cut in half at the end of the prefix is not shown either).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from charter.contracts.text import SHOWN
from charter.deploy.deployment import load_deployment
from charter.kernel.redaction import Redactor


def _option(argv: list[str], *names: str) -> str | None:
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


@functools.lru_cache(maxsize=4)
def _deployment_redactor(project: str, deploy: str | None) -> Redactor:
    try:
        deployment = load_deployment(
            Path(deploy) if deploy else None, project_dir=Path(project).resolve()
        )
        return deployment.redaction.redactor(deployment.known_secrets())
    except Exception:  # no deployment, or one that does not load: the patterns still apply
        return Redactor()


def command_redactor(argv: list[str] | None = None) -> Redactor:
    """The redactor of the deployment the command line names (``--project``/``-p``,
    ``--deploy`` or ``CHARTER_DEPLOY``, else ``--env ENV``'s ``charter.deploy.ENV.yaml``
    beside ``charter.yaml`` as ``charter serve`` reads it), else the default one (patterns
    only)."""
    args = sys.argv[1:] if argv is None else argv
    project = _option(args, "--project", "-p") or "."
    deploy = _option(args, "--deploy") or os.environ.get("CHARTER_DEPLOY")
    env = _option(args, "--env")
    if deploy is None and env:
        named = Path(project) / f"charter.deploy.{env}.yaml"
        deploy = str(named) if named.is_file() else None
    return _deployment_redactor(project, deploy)


def _typed_values(argv: Iterable[str]) -> list[str]:
    """The values typed on the command line (``--opt=value`` and ``TYPE=FILE`` parts too),
    longest first."""
    values: set[str] = set()
    for arg in argv:
        values.add(arg)
        if "=" in arg:
            values.add(arg.split("=", 1)[1])
    return sorted((v for v in values if v), key=len, reverse=True)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def guarded(text: str, redactors: Iterable[Redactor], argv: list[str] | None = None) -> str:
    """``text`` with each typed value that is long or holds a secret shown redacted and cut
    to :data:`SHOWN` characters (whole or as the prefix an error quoted), then redacted."""
    every = [command_redactor(argv), *redactors]
    for value in _typed_values(sys.argv[1:] if argv is None else argv):
        if value not in text and value[: SHOWN - 1] not in text:
            continue
        safe = value
        for redactor in every:
            safe = redactor.redact_text(safe)
        if safe == value and len(value) <= SHOWN:
            continue
        safe = _cut(safe)
        if value in text:
            text = text.replace(value, safe)
        elif len(value) > SHOWN - 1:  # quoted cut short already (contracts.text.shown)
            text = text.replace(value[: SHOWN - 1] + "…", safe)
            text = text.replace(value[: SHOWN - 1], safe.removesuffix("…"))
    for redactor in every:
        text = redactor.redact_text(text)
    return text


def guarded_value(value: Any, redactors: Iterable[Redactor]) -> Any:
    """:func:`guarded` over the strings of a JSON value (an error's extra fields)."""
    if isinstance(value, str):
        return guarded(value, redactors)
    if isinstance(value, dict):
        return {k: guarded_value(v, redactors) for k, v in value.items()}
    if isinstance(value, list):
        return [guarded_value(v, redactors) for v in value]
    return value
