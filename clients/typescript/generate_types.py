"""Generate ``src/openapi.ts`` — the TypeScript types of Charter's HTTP API — from the OpenAPI
document a running server serves (or a saved copy).

    python generate_types.py http://127.0.0.1:8750/openapi.json > src/openapi.ts
    python generate_types.py openapi.json --check src/openapi.ts   # exit 1 when stale

Only the standard library: the same document always gives the same bytes, so a test can
compare the checked-in file with what the live server's schema generates.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from typing import Any

HEADER = (
    "// Generated from Charter's OpenAPI document by generate_types.py. Do not edit:\n"
    "// regenerate with `python generate_types.py URL > src/openapi.ts` after an API change.\n"
)

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _key(name: str) -> str:
    return name if _IDENT.match(name) else json.dumps(name)


def _ref(ref: str) -> str:
    return f'components["schemas"][{json.dumps(ref.rsplit("/", 1)[1])}]'


def ts_type(schema: dict[str, Any] | None, indent: str = "") -> str:
    """The TypeScript type of one JSON Schema (the subset FastAPI emits)."""
    if not schema:
        return "unknown"
    if "$ref" in schema:
        return _ref(schema["$ref"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            parts = [ts_type(s, indent) for s in schema[combinator]]
            return " | ".join(dict.fromkeys(parts))
    if "allOf" in schema:
        return " & ".join(ts_type(s, indent) for s in schema["allOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(ts_type({**schema, "type": k}, indent) for k in kind)
    if kind in ("integer", "number"):
        return "number"
    if kind == "string":
        return "string"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        item = ts_type(schema.get("items"), indent)
        return f"Array<{item}>"
    if kind == "object" or "properties" in schema:
        return _object(schema, indent)
    return "unknown"


def _object(schema: dict[str, Any], indent: str) -> str:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    extra = schema.get("additionalProperties")
    inner = indent + "  "
    lines = []
    for name in props:
        optional = "" if name in required else "?"
        lines.append(f"{inner}{_key(name)}{optional}: {ts_type(props[name], inner)};")
    if extra is True or (extra is None and not props):
        lines.append(f"{inner}[key: string]: unknown;")
    elif isinstance(extra, dict):
        lines.append(f"{inner}[key: string]: {ts_type(extra, inner)};")
    if not lines:
        return "Record<string, never>"
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def _json_body(content: dict[str, Any] | None) -> dict[str, Any] | None:
    if not content:
        return None
    media = content.get("application/json") or content.get("application/problem+json")
    return None if media is None else media.get("schema")


def generate(doc: dict[str, Any]) -> str:
    out = [HEADER]
    out.append(f"export const API_VERSION = {json.dumps(doc['info']['version'])};\n")
    out.append("export interface components {\n  schemas: {")
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out.append(f"    {_key(name)}: {ts_type(schema, '    ')};")
    out.append("  };\n}\n")
    out.append("/** Each operation: path and query parameters, JSON body and JSON answers. */")
    out.append("export interface operations {")
    for path, methods in sorted(doc["paths"].items()):
        for method, op in sorted(methods.items()):
            out.append(f"  {json.dumps(method.upper() + ' ' + path)}: {{")
            params: dict[str, list[str]] = {"path": [], "query": []}
            for p in op.get("parameters", []):
                where = p.get("in")
                if where in params:
                    opt = "" if p.get("required") else "?"
                    params[where].append(f"{_key(p['name'])}{opt}: {ts_type(p.get('schema'))}")
            for where, items in params.items():
                body = "; ".join(items)
                out.append(f"    {where}: {{ {body} }};" if items else f"    {where}: {{}};")
            request = _json_body(op.get("requestBody", {}).get("content"))
            out.append(f"    body: {ts_type(request, '    ') if request else 'never'};")
            answers = []
            for status, response in sorted(op.get("responses", {}).items()):
                if status.startswith("2"):
                    schema = _json_body(response.get("content"))
                    answers.append(ts_type(schema, "    ") if schema else "unknown")
            answer = " | ".join(dict.fromkeys(answers)) or "unknown"
            out.append(f"    response: {answer};")
            out.append("  };")
    out.append("}\n")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv else 2
    source = argv[0]
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source, timeout=30) as answer:
            doc = json.load(answer)
    else:
        with open(source, encoding="utf-8") as f:
            doc = json.load(f)
    text = generate(doc)
    if len(argv) >= 3 and argv[1] == "--check":
        with open(argv[2], encoding="utf-8") as f:
            if f.read() != text:
                print(f"{argv[2]} is stale: regenerate it from {source}", file=sys.stderr)
                return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
