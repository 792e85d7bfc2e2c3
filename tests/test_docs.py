"""The documentation holds the facts the code defines, and its links hold: the examples' answers are what the
code answers, every error code is in the API page's table under its HTTP status, every setting in a table row
with its default, every relative link of README.md goes to a file and heading that exist, and the site builds
strictly without loading anything from another host."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify
from mkdocs.commands.build import build
from mkdocs.config import load_config
from pydantic import AliasChoices

from app.api.errors import STATUS
from app.cli import main
from app.core.errors import ErrorCode
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
EXAMPLE = re.compile(r"-d '(\{.*?\})'\n```\n+```json\n(.*?)```", re.DOTALL)
ELIDED = "…"


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row (separator rows left out); `\\|` stays inside its cell."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"\|[\s:|-]+\|", line):
            continue
        rows.append([cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return rows


def agrees(shown: object, answered: object) -> bool:
    """Whether a documented answer is the real one: the same keys and values, where a list ending in "…" shows
    only its first items."""
    if isinstance(shown, dict):
        return (
            isinstance(answered, dict)
            and shown.keys() == answered.keys()
            and all(agrees(value, answered[key]) for key, value in shown.items())
        )
    if isinstance(shown, list):
        if not isinstance(answered, list):
            return False
        if shown and shown[-1] == ELIDED:
            shown, answered = shown[:-1], answered[: len(shown) - 1]
        return len(shown) == len(answered) and all(agrees(a, b) for a, b in zip(shown, answered))
    return shown == answered


@pytest.mark.parametrize(
    ("page", "command"),
    [(README, "assign"), (DOCS / "api.md", "assign"), (DOCS / "placement.md", "placement")],
    ids=["README", "api", "placement"],
)
def test_the_examples_answer_what_the_code_answers(page, command, tmp_path, capsys):
    request, shown = EXAMPLE.search(page.read_text()).groups()
    body = json.loads(request)
    stored = {key: body.pop(key) for key in ("group",) if key in body}  # the CLI stores nothing
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    assert main([command, "--input", str(path)]) == 0
    answered = json.loads(capsys.readouterr().out)
    if stored:
        answered.update(stored, version=1)  # what the service adds when it stores the first version
    assert agrees(json.loads(shown), answered), answered


def test_every_error_code_is_in_the_api_page_under_its_status():
    statuses_listing: dict[str, set[int]] = {}
    for cells in table_rows((DOCS / "api.md").read_text()):
        statuses = {int(s) for s in re.findall(r"\b[1-5]\d\d\b", cells[0])}
        for code in CODE_SPAN.findall(" ".join(cells[1:])):
            statuses_listing.setdefault(code, set()).update(statuses)
    misplaced = {code.value: STATUS[code] for code in ErrorCode if STATUS[code] not in statuses_listing.get(code, ())}
    assert misplaced == {}, "codes missing from docs/api.md's error table, or under another status"


def variable(name: str) -> str:
    """The environment variable a setting reads (its first alias, else the prefix and its name)."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()


def spellings(default: object) -> set[str]:
    """How a table may write a default: `false`, `.groupfit`, `[]`, 604800 for 604800.0, 1.0 or 1."""
    if isinstance(default, bool):
        return {str(default).lower()}
    if isinstance(default, float) and default.is_integer():
        return {str(default), str(int(default))}
    return {str(default)}


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_default(name):
    env = variable(name)
    field = Settings.model_fields[name]
    default = field.default_factory() if field.default_factory is not None else field.default
    rows = [
        cells
        for page in sorted(DOCS.rglob("*.md"))
        for cells in table_rows(page.read_text())
        if len(cells) >= 2 and env in CODE_SPAN.findall(cells[0])
    ]
    assert rows, f"{env} is in no table of docs/ (operating.md's Settings table lists every setting)"
    if default is None:
        return
    shown = [set(re.split(r"[\s,`]+", cells[1])) for cells in rows]
    assert any(spellings(default) & tokens for tokens in shown), f"{env}: default {default!r} not in {rows}"


def anchors(page: Path) -> set[str]:
    return {slugify(CODE_SPAN.sub(r"\1", title), "-") for title in HEADING.findall(page.read_text())}


def test_every_relative_link_of_the_readme_resolves():
    broken = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        page = (ROOT / path) if path else README
        if not page.exists() or (anchor and anchor not in anchors(page)):
            broken.append(target)
    assert broken == []


def test_the_site_builds_strictly_and_loads_nothing_from_another_host(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    monkeypatch.chdir(ROOT)  # the snippets' base path is the repository
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path))
    assert config.strict and config.theme["font"] is False
    build(config)  # strict: any warning (a broken link or anchor, a missing snippet, a page off the nav) aborts
    pages = sorted(tmp_path.rglob("*.html"))
    assert len(pages) >= 14
    fetched = {
        str(page.relative_to(tmp_path)): found
        for page in pages
        if (
            found := re.findall(
                r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"((?:https?:)?//[^\"]+)\"", page.read_text()
            )
        )
    }
    assert fetched == {}
