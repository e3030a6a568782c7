"""MkDocs hook: the pages generated from the code, made at every build (registered in mkdocs.yml ``hooks:``).

Nothing generated is written into docs/ or committed, so nothing can go stale: ``mkdocs build --strict`` alone
makes the whole site.

- ``reference/openapi.md`` and ``reference/openapi.json``: the control plane's OpenAPI schema, from
  ``rockroll.api.server.app.create_app(settings).openapi()`` (what the server answers at ``/openapi.json``).
- ``training/config-reference.md``: every training config key, from ``rockroll.trainer.config_io.describe_config()``,
  the source of ``rockroll train --help-config``.
- ``benchmarks/report.md`` (and its plots): bench/REPORT.md as ``make bench`` wrote it, the one source.
- ``<!-- include: PATH#NAME -->`` in a page: the lines of PATH (from the repository root) between
  ``<!-- NAME -->`` and ``<!-- /NAME -->``, so a table kept beside its files appears in the docs unchanged.
- ``<!-- headline -->`` in a page: the "Headline" table of bench/REPORT.md.

It also checks docs/llms.txt against the nav (every page listed, every link a page) and copies each page's
Markdown next to its HTML in the site, so the links of llms.txt resolve there too.

Print a generated page without building: ``python docs/hooks/generate.py openapi|config|report``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("mkdocs.hooks.generate")

OPENAPI_MD = "reference/openapi.md"
OPENAPI_JSON = "reference/openapi.json"
CONFIG_MD = "training/config-reference.md"
REPORT_MD = "benchmarks/report.md"
INCLUDE = re.compile(r"<!-- include: (?P<path>[^#\s]+)#(?P<name>[\w-]+) -->")

_markdown: dict[str, str] = {}  # src_uri -> the page's Markdown after the includes (copied into the site)


# ---------------------------------------------------------------------------------------------- the generators


def openapi_spec() -> dict[str, Any]:
    """The schema the control plane serves, from an app built with default settings over a scratch folder."""
    from rockroll.api.server.app import create_app
    from rockroll.api.server.settings import Settings

    with tempfile.TemporaryDirectory(prefix="rr-docs-") as d:
        settings = Settings(database_url=f"sqlite:///{d}/rockroll.db", sandbox_state_dir=f"{d}/sb", backend="process")
        return create_app(settings).openapi()  # builds routes only: the database opens in the app's lifespan


def _cell(text: object) -> str:
    """``text`` as one Markdown table cell."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|").replace("<", "&lt;")


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema as a short type: ``str``, ``list[Foo]``, ``"a" | "b"``, a link for ``$ref``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " \\| ".join(_type(s) for s in schema[key])
    t = schema.get("type")
    if t == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    if t == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"dict[str, {_type(schema['additionalProperties'])}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}.get(
        str(t), str(t or "any")
    )


def openapi_markdown(spec: dict[str, Any]) -> str:
    info = spec["info"]
    out = [
        "# HTTP API reference",
        "",
        f"**{info['title']}** {info.get('version', '')}: {info.get('description', '')}",
        "",
        "Generated at build time from the app itself (`rockroll.api.server.app.create_app(settings).openapi()`), so it "
        "is what a server answers at `/openapi.json`; a running server also serves it as Swagger UI at `/docs` and "
        "ReDoc at `/redoc`, offline. The raw schema: [openapi.json](openapi.json). How the routes behave (owners, "
        "caps, errors, the data plane): [Control plane and API](../control-plane.md).",
        "",
        'Every error answers `{"error": {"code", "message", "details"}}`. Routes marked *bearer* need '
        "`Authorization: Bearer TOKEN` (`rockroll token create`); `rockroll serve-api --dev` needs none.",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in ("get", "put", "post", "delete", "patch"):
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    out += ["| group | routes |", "| --- | --- |"]
    out += [f"| [{tag}](#{tag}) | {len(ops)} |" for tag, ops in sorted(by_tag.items())]
    out.append("")
    for tag, ops in sorted(by_tag.items()):
        out += [f"## {tag} {{ #{tag} }}", ""]
        for method, path, op in ops:
            op_id = op.get("operationId", f"{method}-{path}")
            out += [f"### `{method.upper()} {path}` {{ #{op_id.lower()} }}", ""]
            summary = op.get("summary", "")
            auth = "bearer" if op.get("security") else "no token"
            out += [f"{summary} ({'*bearer*' if auth == 'bearer' else auth})", ""]
            if op.get("description"):
                out += [op["description"].strip(), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | description |", "| --- | --- | --- | --- | --- |"]
                for p in params:
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                        f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                    )
                out.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out += [f"Request body (`{media}`): {_type(content.get('schema', {}))}", ""]
            responses = op.get("responses", {})
            if responses:
                out += ["| status | answer |", "| --- | --- |"]
                for code, r in responses.items():
                    schema = r.get("content", {}).get("application/json", {}).get("schema")
                    what = _cell(r.get("description", "")) + (f": {_type(schema)}" if schema else "")
                    out.append(f"| {code} | {what} |")
                out.append("")
    schemas = spec.get("components", {}).get("schemas", {})
    out += ["## Schemas", ""]
    for name, schema in sorted(schemas.items()):
        out += [f"### {name} {{ #schema-{name.lower()} }}", ""]
        if schema.get("description"):
            out += [" ".join(schema["description"].split()), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
            for field, s in props.items():
                desc = s.get("description", "")
                if "default" in s:
                    desc = f"{desc} (default `{json.dumps(s['default'])}`)".strip()
                out.append(f"| `{field}` | {_type(s)} | {'yes' if field in required else 'no'} | {_cell(desc)} |")
            out.append("")
        elif "enum" in schema:
            out += [f"One of {_type(schema)}.", ""]
    return "\n".join(out)


def config_markdown() -> str:
    from rockroll.trainer.config_io import describe_config

    rows = describe_config()
    sections: dict[str, list[Any]] = {}
    for r in rows:
        head = r.key.split(".", 1)[0] if "." in r.key else ""
        sections.setdefault(head, []).append(r)
    out = [
        "# Training config reference",
        "",
        f"Every key of a training config ({len(rows)} in all), generated at build time from the config model "
        "(`rockroll.trainer.config_io.describe_config()`): the same rows `rockroll train --help-config` prints. "
        "Set them in a YAML file (sections nest: `optim: {lr: 3e-4}`) or as dotted overrides "
        "(`rockroll train CONFIG.yaml optim.lr=3e-4`); an unknown key or a bad value stops before training with "
        "one error naming the key. How configs are read: [Configs](configs.md). A key tagged `[kind]` belongs "
        "to that kind of a section chosen by its `kind` key (for example `rollout.engine.kind`).",
        "",
    ]
    names = {"": "Top-level keys"}
    out += ["| section | keys |", "| --- | --- |"]
    for head, rs in sections.items():
        anchor = head or "top-level"
        out.append(f"| [{names.get(head, f'`{head}`')}](#{anchor}) | {len(rs)} |")
    out.append("")
    for head, rs in sections.items():
        title = names.get(head, f"`{head}`")
        out += [f"## {title} {{ #{head or 'top-level'} }}", ""]
        groups: dict[str, list[Any]] = {}  # the keys of a nested section under its parent (rollout.episode...)
        for r in rs:
            parts = r.key.split(".")
            groups.setdefault(".".join(parts[:2]) if len(parts) > 2 else "", []).append(r)
        for sub, grs in groups.items():
            if sub:
                out += [f"### `{sub}` {{ #{sub.replace('.', '-')} }}", ""]
            out += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
            for r in grs:
                out.append(f"| `{r.key}` | `{r.type}` | `{r.default}` | {_cell(r.description)} |")
            out.append("")
    return "\n".join(out)


def report_markdown() -> str:
    """bench/REPORT.md as it is; its images (``plots/*.png``) are copied beside the page."""
    text = (ROOT / "bench" / "REPORT.md").read_text()
    note = (
        '\n!!! note "Where this page comes from"\n    This page is `bench/REPORT.md`, copied at build time; '
        "`make bench` rewrites that file (and its plots). What each benchmark measures: "
        "[Benchmarks](index.md).\n\n"
    )
    first, _, rest = text.partition("\n")
    return first + "\n" + note + rest


def headline_table() -> str:
    """The table under bench/REPORT.md's "## Headline"."""
    text = (ROOT / "bench" / "REPORT.md").read_text()
    m = re.search(r"^## Headline\n\n(.*?)(?=\n## |\Z)", text, re.S | re.M)
    if not m:
        log.warning("bench/REPORT.md has no '## Headline' section")
        return ""
    return m.group(1).strip()


def include(match: re.Match[str], page: str) -> str:
    path, name = ROOT / match["path"], match["name"]
    if not path.is_file():
        log.warning("%s includes %s, which does not exist", page, match["path"])
        return ""
    m = re.search(rf"<!-- {name} -->\n(.*?)<!-- /{name} -->", path.read_text(), re.S)
    if not m:
        log.warning("%s includes %s#%s: no '<!-- %s -->' ... '<!-- /%s -->' there", page, path, name, name, name)
        return ""
    return m.group(1).rstrip()


# ---------------------------------------------------------------------------------------------- the mkdocs events


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    spec = openapi_spec()
    generated = {
        OPENAPI_MD: openapi_markdown(spec),
        OPENAPI_JSON: json.dumps(spec, indent=2) + "\n",
        CONFIG_MD: config_markdown(),
        REPORT_MD: report_markdown(),
    }
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    for png in sorted((ROOT / "bench" / "plots").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/plots/{png.name}", abs_src_path=str(png)))
    return files


def on_nav(nav: Any, config: Any, files: Any) -> Any:
    """docs/llms.txt lists every page of the nav, and each of its links is a page."""
    llms = Path(config["docs_dir"]) / "llms.txt"
    if not llms.is_file():
        log.warning("docs/llms.txt is missing")
        return nav
    links = set(re.findall(r"\]\(([^)\s]+\.md)\)", llms.read_text()))
    pages = {p.file.src_uri for p in nav.pages}
    for missing in sorted(pages - links):
        log.warning("docs/llms.txt does not list the page %s", missing)
    for stray in sorted(links - pages):
        log.warning("docs/llms.txt links %s, which is not a page of the nav", stray)
    return nav


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    uri = page.file.src_uri
    markdown = INCLUDE.sub(lambda m: include(m, uri), markdown)
    if "<!-- headline -->" in markdown:
        markdown = markdown.replace("<!-- headline -->", headline_table())
    _markdown[uri] = markdown
    return markdown


def on_post_build(config: Any) -> None:
    site = Path(config["site_dir"])
    for uri, markdown in _markdown.items():
        target = site / uri
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(markdown)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    pages = {"openapi": lambda: openapi_markdown(openapi_spec()), "config": config_markdown, "report": report_markdown}
    if what not in pages:
        sys.exit(f"usage: python docs/hooks/generate.py {'|'.join(pages)}")
    sys.stdout.write(pages[what]() + "\n")
