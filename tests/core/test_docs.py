"""The documentation keeps up with the code: every config key documented, every relative link alive, a short README.

The keys are read from the code itself: each poller type's own keys are what its ``make`` accepts (its
"unknown key" error lists them), the common ones are :mod:`memex.config`'s tuples; nothing here is a
hand-kept list. No MkDocs needed: ``make docs`` checks the same links again with ``mkdocs build --strict``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from memex import config, registry
from memex.cli.main import main as cli
from memex.config import SourceConfig
from memex.errors import ConfigError
from tests.conftest import ROOT

DOCS = ROOT / "docs"
PROBE = "zz_not_a_key"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    """Every documentation page a reader sees: README.md, deploy/README.md and docs/ (without the _incoming notes)."""
    pages = [ROOT / "README.md", ROOT / "deploy" / "README.md"]
    return pages + sorted(p for p in DOCS.rglob("*.md") if "_incoming" not in p.relative_to(DOCS).parts)


def _prose(text: str) -> str:
    """The text outside fenced code blocks (links there are examples, not links)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading; GitHub's is the same for the headings we write."""
    text = re.sub(r"[`*]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings."""
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", _prose(page.read_text()), flags=re.M)}


def accepted_keys(type_name: str, tmp_path: Path) -> set[str]:
    """The keys a poller type's own section accepts, as its ``make`` reports them for a key it does not know.

    Required keys are filled in with a string as the factory asks for them, until it reaches its check
    for unknown keys, whose message lists every key it read.
    """
    factory = registry.factory_for(type_name)
    assert factory is not None, type_name
    options: dict[str, object] = {PROBE: 1}
    for _ in range(20):
        source = SourceConfig(name="probe", type=type_name, path=tmp_path / "config.toml", options=options, state_dir=tmp_path)
        try:
            factory(source)
        except ConfigError as exc:
            key = (exc.key or "").removeprefix("sources.probe.")
            if key == PROBE:
                listed = re.search(r"known here: ([^)]*)\)", str(exc))
                assert listed is not None, str(exc)
                return set(listed.group(1).split(", "))
            assert key and key not in options, f"{type_name}: cannot get past {exc}"
            options[key] = "x"
        else:
            pytest.fail(f"{type_name}: the unknown key {PROBE!r} was accepted")
    pytest.fail(f"{type_name}: too many required keys")


def _page_for(type_name: str) -> Path:
    """A source type's page: docs/sources/<its poller package>.md (imap and maildir share pollers.email)."""
    package = registry.BUILTIN[type_name].split(":")[0].split(".")[1]
    return DOCS / "sources" / f"{package}.md"


def _documents(text: str, key: str) -> bool:
    """Whether a page names ``key`` as a key: in inline code, or as ``key =`` (a TOML example, maybe commented)."""
    return f"`{key}`" in text or f"`{key} =" in text or re.search(rf"(?<![\w.]){re.escape(key)} =", text) is not None


@pytest.mark.parametrize("type_name", sorted(registry.BUILTIN))
def test_every_key_a_poller_accepts_is_on_its_source_page(type_name: str, tmp_path: Path) -> None:
    """Each key a built-in poller type accepts in its section appears on that source's page (a new key cannot go undocumented)."""
    page = _page_for(type_name)
    assert page.is_file(), f"{type_name}: no page {page.relative_to(ROOT)}"
    keys = accepted_keys(type_name, tmp_path)
    assert keys, type_name
    text = page.read_text()
    missing = sorted(k for k in keys if not _documents(text, k))
    assert not missing, f"{page.relative_to(ROOT)} does not document {missing} (accepted by type {type_name!r})"


def test_every_common_config_key_is_on_the_configuration_page() -> None:
    """Top-level, [store] and every-source keys, as memex.config checks them, each appear on docs/configuration.md."""
    text = (DOCS / "configuration.md").read_text()
    keys = set(config._GLOBAL_KEYS) | set(config._STORE_KEYS) | set(config.SOURCE_COMMON_KEYS)
    missing = sorted(k for k in keys if not _documents(text, k))
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_the_probe_sees_a_key_read_after_the_required_ones(tmp_path: Path) -> None:
    """The key probe finds optional keys behind required ones (IMAP's ca_file comes after host, user and a password)."""
    keys = accepted_keys("imap", tmp_path)
    assert {"host", "user", "password_cmd", "password_env", "ca_file"} <= keys


def test_every_relative_link_resolves() -> None:
    """Every relative link in README.md, deploy/README.md and docs/ names a file that exists, and a heading for its #anchor."""
    broken = []
    for page in _pages():
        for target in LINK.findall(_prose(page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_the_link_check_catches_a_broken_link_and_anchor(tmp_path: Path) -> None:
    """The slug and link helpers agree with MkDocs on our headings, and see a missing anchor."""
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## Watching instead of polling every minute: `memex watch`\n\n## launchd (macOS)\n")
    assert _anchors(page) == {"title", "watching-instead-of-polling-every-minute-memex-watch", "launchd-macos"}
    assert LINK.findall("see [a](b.md#c) and ![img](i.png) and `[x](y)`") == ["b.md#c", "y"]


def test_every_docs_page_is_in_the_site_nav() -> None:
    """Each page under docs/ (but the _incoming notes) is listed in mkdocs.yml's nav, and each nav entry exists."""
    nav = set(re.findall(r"^\s*- [^:]+: (\S+\.md)$", re.sub(r'"[^"]*"', "x", (ROOT / "mkdocs.yml").read_text()), flags=re.M))
    pages = {str(p.relative_to(DOCS)) for p in _pages() if DOCS in p.parents}
    assert nav == pages


def test_every_command_is_in_the_commands_table() -> None:
    """Each `memex` command the CLI has (its --help list) has a row in docs/running.md's command table."""
    text = (DOCS / "running.md").read_text()
    missing = sorted(name for name in cli.list_commands(None) if f"| `memex {name}" not in text)  # type: ignore[arg-type]
    assert not missing, f"docs/running.md's command table lacks {missing}"


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    """README.md is at most 200 lines and its first code block holds `make demo` and `make test`."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first = re.search(r"^```\w*\n(.*?)^```", text, flags=re.S | re.M)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
