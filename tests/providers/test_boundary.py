"""No provider SDK type crosses into the kernel, the ledger, the server or the stream events:
those modules never import ``openai`` or ``anthropic`` (checked statically over their
source), and importing them — the whole server included — loads neither SDK."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import charter

SDKS = ("openai", "anthropic")
PACKAGE = Path(charter.__file__).parent
GUARDED = [
    *sorted((PACKAGE / "kernel").rglob("*.py")),
    *sorted((PACKAGE / "ledger").rglob("*.py")),
    *sorted((PACKAGE / "server").rglob("*.py")),
    *sorted((PACKAGE / "proposals").rglob("*.py")),
    PACKAGE / "providers" / "events.py",
    PACKAGE / "providers" / "base.py",
    PACKAGE / "providers" / "orchestrator.py",
    PACKAGE / "providers" / "turns.py",
    PACKAGE / "providers" / "scripted.py",
    PACKAGE / "providers" / "config.py",
    PACKAGE / "providers" / "__init__.py",
]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_guarded_modules_never_import_a_provider_sdk() -> None:
    assert len(GUARDED) > 20
    offenders = {str(p.relative_to(PACKAGE)): _imports(p) & set(SDKS) for p in GUARDED}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_server_and_the_orchestrator_loads_no_sdk() -> None:
    code = (
        "import sys\n"
        "import charter.kernel, charter.ledger, charter.server, charter.providers\n"
        "import charter.providers.events, charter.providers.turns, charter.providers.config\n"
        "from charter.server import create_app\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {SDKS!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_adapters_are_the_only_modules_naming_an_sdk() -> None:
    naming = sorted(
        str(p.relative_to(PACKAGE / "providers"))
        for p in (PACKAGE / "providers").glob("*.py")
        if _imports(p) & set(SDKS)
    )
    assert naming == ["anthropic.py", "openai_compat.py"]
