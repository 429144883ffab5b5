"""The layers of docs/architecture.md hold in src/charter, and the check can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.layers import LAYERS, Import, Module, check, package_of, read_tree

SRC = Path(__file__).resolve().parent.parent / "src"


def test_the_tree_keeps_its_layers() -> None:
    modules = read_tree(SRC)
    assert "charter.kernel.kernel" in modules  # the walk found the package
    assert check(modules) == []


def test_the_doc_draws_the_same_layers() -> None:
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    present = {package_of(m) for m in read_tree(SRC)}
    for layer in LAYERS:
        for pkg in layer:
            if pkg not in present:
                continue
            name = "charter/__init__.py" if pkg == "__init__" else pkg
            assert f"`{name}" in doc, f"docs/architecture.md does not name {name}"


def _module(name: str, *imports: str, lines: int = 10) -> Module:
    return Module(
        name=name,
        path=name.replace(".", "/") + ".py",
        lines=lines,
        imports=tuple(Import(t, i + 1) for i, t in enumerate(imports)),
    )


def test_a_synthetic_upward_import_fails() -> None:
    ok = {
        "charter.ledger.events": _module("charter.ledger.events", "charter.errors"),
        "charter.errors": _module("charter.errors"),
        "charter.runtime": _module("charter.runtime", "charter.ledger.events"),
    }
    assert check(ok) == []
    bad = {**ok, "charter.ledger.events": _module("charter.ledger.events", "charter.runtime")}
    problems = check(bad)
    assert any(
        "charter/ledger/events.py:1 imports charter.runtime" in p and "may not import" in p
        for p in problems
    ), problems
    assert any(p.startswith("package cycle ledger <-> runtime") for p in problems), problems


def test_a_synthetic_cycle_size_leaf_and_stray_package_fail() -> None:
    modules = {
        "charter.executors.a": _module("charter.executors.a", "charter.deploy.b"),
        "charter.deploy.b": _module("charter.deploy.b", "charter.executors.a", lines=801),
        "charter.cli.c": _module("charter.cli.c", "charter.testing.d"),
        "charter.testing.d": _module("charter.testing.d"),
        "charter.newpkg.e": _module("charter.newpkg.e"),
    }
    problems = check(modules)
    assert any(p.startswith("package cycle deploy <-> executors") for p in problems), problems
    assert any(
        p.startswith("module cycle charter.deploy.b <-> charter.executors.a") for p in problems
    )
    assert "charter/deploy/b.py has 801 lines (more than 800)" in problems
    assert any("nothing may import 'testing'" in p for p in problems), problems
    assert any("package 'newpkg' is in no layer" in p for p in problems), problems


def test_no_module_imports_pytest(tmp_path: Path) -> None:
    src = _copy_tree(tmp_path)
    kit = src / "charter" / "testing" / "store_conformance.py"
    kit.write_text(kit.read_text(encoding="utf-8") + "\n\ndef _f() -> None:\n    import pytest\n")
    problems = check(read_tree(src))
    assert len(problems) == 1
    assert problems[0].startswith("charter/testing/store_conformance.py:")
    assert problems[0].endswith("imports pytest: no module may")


def _copy_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SRC / "charter", src / "charter", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def test_an_upward_import_added_to_a_copy_of_the_tree_fails(tmp_path: Path) -> None:
    src = _copy_tree(tmp_path)
    events = src / "charter" / "ledger" / "events.py"
    text = events.read_text(encoding="utf-8")
    lineno = len(text.splitlines()) + 4  # two blank lines, the def, then the import
    # function-local, so only a walk that includes function bodies can see it
    events.write_text(
        text + "\n\ndef _upward() -> object:\n    from charter.runtime import Runtime\n\n"
        "    return Runtime\n",
        encoding="utf-8",
    )
    problems = check(read_tree(src))
    assert any(
        p.startswith(f"charter/ledger/events.py:{lineno} imports charter.runtime: 'ledger'")
        for p in problems
    ), problems


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    src = _copy_tree(tmp_path)
    events = src / "charter" / "ledger" / "events.py"
    events.write_text(
        events.read_text(encoding="utf-8")
        + "\n\nimport typing\n\nif typing.TYPE_CHECKING:\n    from charter.runtime import Runtime\n"
        "else:\n    from charter import errors\n",
        encoding="utf-8",
    )
    modules = read_tree(src)
    assert check(modules) == []
    assert {i.target for i in modules["charter.ledger.events"].imports} >= {"charter.errors"}


def test_raises_without_pytest() -> None:
    from charter.testing.raises import raises

    with raises(ValueError, match=r"calls\.actor") as info:
        raise ValueError("bad calls.actor")
    assert str(info.value) == "bad calls.actor"
    with pytest.raises(AssertionError), raises(ValueError):
        pass
    with pytest.raises(AssertionError), raises(ValueError, match="x"):
        raise ValueError("y")
    with pytest.raises(KeyError), raises(ValueError):
        raise KeyError("other")


@pytest.mark.parametrize(
    ("module", "package"),
    [("charter", "__init__"), ("charter.errors", "errors"), ("charter.kernel.core", "kernel")],
)
def test_package_of(module: str, package: str) -> None:
    assert package_of(module) == package


def test_relative_and_aliased_imports_resolve(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "charter"
    (pkg / "ledger").mkdir(parents=True)
    (pkg / "kernel").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ledger" / "__init__.py").write_text("")
    (pkg / "kernel" / "__init__.py").write_text("")
    (pkg / "kernel" / "core.py").write_text("")
    (pkg / "ledger" / "a.py").write_text("from ..kernel import core\n")
    (pkg / "ledger" / "b.py").write_text("import charter.kernel.core as c\n")
    modules = read_tree(tmp_path / "src")
    assert [i.target for i in modules["charter.ledger.a"].imports] == ["charter.kernel.core"]
    assert [i.target for i in modules["charter.ledger.b"].imports] == ["charter.kernel.core"]
    assert len(check(modules)) == 2
