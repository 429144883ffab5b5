"""The vendored assets are exactly the files VENDOR.md lists (sha256), and every page only
loads scripts from the console's own static folder."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import charter.server.console

STATIC = Path(charter.server.console.__file__).parent / "static"
TEMPLATES = Path(charter.server.console.__file__).parent / "templates"
ROW = re.compile(r"^\| (\S+) \| [^|]+ \| (\S+) \| (\S+) \| ([0-9a-f]{64}) \|$", re.M)


def test_vendored_hashes_match_vendor_md() -> None:
    rows = ROW.findall((STATIC / "VENDOR.md").read_text())
    assert {r[0] for r in rows} == {"htmx.min.js", "htmx-ext-sse.min.js"}
    for name, _version, licence, digest in rows:
        assert licence == "0BSD"
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name


def test_templates_have_no_inline_scripts_or_remote_assets() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert "<script>" not in text, template
        assert "<script " not in text.replace("<script src=", ""), template
        assert "http://" not in text, template
        assert "https://" not in text, template
        assert not re.search(r"\son[a-z]+=", text), template  # no inline event handlers
