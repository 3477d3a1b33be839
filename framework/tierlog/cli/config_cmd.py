"""``tierlog config``: every configuration key, and a checker for configuration files.

Without options it documents the broker keys, the topic keys and each installed plugin's keys
(type, default, allowed values, dynamic or not); ``--json`` gives the same for machines.
``--check FILE`` validates a TOML or ``.properties`` file with the environment applied, exactly
as a broker would load it: the chosen plugins are loaded and their configuration slices validated
by the same code as at start-up, without configuring anything. It exits 2 with one line naming
the offending key, or the file and why it cannot be read.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import attrs
import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config import BROKER_CONFIG, HIDDEN, TOPIC_CONFIG, BrokerConfig, ConfigDef, ConfigKey
from ..config.secrets import show_value
from ..errors import ConfigFileError, InvalidConfigError, TierlogError

_CHECK_FAILED = 2
#: Columns needed for one key per line with type, default and flag in columns of their own.
_WIDE_CONSOLE = 150


@attrs.frozen
class _Section:
    title: str
    prefix: str
    definition: ConfigDef
    #: The plugin whose keys these are; empty for the broker and topic sections.
    plugin: str = ""


def _plugin_sections() -> tuple[list[_Section], str | None]:
    """Installed plugins' sections, plus a warning when they cannot be listed."""
    try:
        plugins = importlib.import_module("tierlog.plugins")
        sections = plugins.plugin_config_sections()
    except (ImportError, AttributeError):
        return [], None
    except TierlogError as err:
        return [], f"plugin configuration unavailable: {err}"
    return [
        _Section(f"plugin {section.plugin}", section.prefix, section.definition, section.plugin)
        for section in sections
    ], None


def _default_text(key: ConfigKey) -> str:
    if key.required:
        return "(required)"
    if key.secret and key.default is not None:
        return HIDDEN
    if isinstance(key.default, tuple):
        return ",".join(key.default)
    if isinstance(key.default, str):
        return key.default
    return show_value(key.default)


def _doc_text(key: ConfigKey) -> str:
    parts = [key.doc]
    if key.inherited_from:
        parts.append(f"Default from {key.inherited_from}.")
    if key.synonyms:
        parts.append("Synonyms: " + ", ".join(key.synonyms) + ".")
    return " ".join(parts)


def _json_default(key: ConfigKey) -> object:
    if key.required:
        return None
    if key.secret and key.default is not None:
        return HIDDEN
    if isinstance(key.default, tuple):
        return list(key.default)
    return key.default


def _key_record(prefix: str, key: ConfigKey) -> dict[str, object]:
    return {
        "name": prefix + key.name,
        "type": key.type.value,
        "default": _json_default(key),
        "required": key.required,
        "valid": key.validator.description if key.validator else None,
        "dynamic": key.dynamic,
        "importance": key.importance.value,
        "synonyms": [prefix + synonym for synonym in key.synonyms],
        "inherited_from": key.inherited_from,
        "doc": key.doc,
    }


def _dynamic_text(key: ConfigKey) -> str:
    return "dynamic" if key.dynamic else "static"


def _wide_table(section: _Section, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("key", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("default", overflow="fold")
    table.add_column("dynamic", no_wrap=True)
    table.add_column("valid values")
    table.add_column("doc", ratio=1)
    for key in section.definition:
        cells = (
            section.prefix + key.name,
            key.type.value,
            _default_text(key),
            _dynamic_text(key),
            key.validator.description if key.validator else "",
            _doc_text(key),
        )
        table.add_row(*(escape(cell) for cell in cells))
    return table


def _compact_table(section: _Section, title: str) -> Table:
    """Type, default and dynamic flag under the key name, so 80 columns still read well."""
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("key", overflow="fold")
    table.add_column("doc", ratio=1)
    for key in section.definition:
        facts = f"{key.type.value}, default {_default_text(key)}, {_dynamic_text(key)}"
        doc = _doc_text(key)
        if key.validator:
            doc += f" Valid values: {key.validator.description}."
        name = escape(section.prefix + key.name)
        table.add_row(f"[bold]{name}[/bold]\n{escape(facts)}", escape(doc))
    return table


def _print_tables(sections: Iterable[_Section]) -> None:
    console = Console()
    layout = _wide_table if console.width >= _WIDE_CONSOLE else _compact_table
    for section in sections:
        title = section.title + (f" (keys under {section.prefix})" if section.prefix else "")
        console.print(layout(section, escape(title)))


def _check_plugin_keys(config: BrokerConfig, sections: Iterable[_Section]) -> None:
    """Reject unknown or badly typed keys in the ``plugin.<name>.`` slice of plugins that do not
    take part in a run with this configuration (storage providers not chosen): their keys are
    still checked for typos, though no run reads them.
    """
    for section in sections:
        for name, raw in config.plugin_slice(section.prefix).items():
            key = section.definition.find(name)
            if key is None and section.definition.is_plugin_key(
                name, section.definition.raw_prefixes
            ):
                continue  # free-form keys the plugin passes on, e.g. fsspec storage options
            if key is None:
                suggestion = section.definition.suggest(name)
                hint = f" (did you mean {section.prefix + suggestion!r}?)" if suggestion else ""
                raise InvalidConfigError(
                    f"unknown configuration key {section.prefix + name!r} for "
                    f"{section.title}{hint}",
                    key=section.prefix + name,
                )
            attrs.evolve(key, name=section.prefix + key.name).parse(raw)


def _check(path: Path, plugin_sections: Iterable[_Section]) -> None:
    """Load ``path`` as ``tierlog run`` does, then validate the slices of the plugins a run would
    configure through the same code as a broker's start-up (without configuring them)."""
    from ..host import PluginHost

    config = BrokerConfig.from_sources(file=path, environ=os.environ)
    host = PluginHost.create(config)
    host.check_config()
    taking_part = set(host.participants)
    _check_plugin_keys(
        config, [section for section in plugin_sections if section.plugin not in taking_part]
    )


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--check",
    "check_file",
    type=click.Path(path_type=Path),
    help="Validate a .toml or .properties file (environment applied) and exit.",
)
@click.pass_context
def config_command(ctx: click.Context, as_json: bool, check_file: Path | None) -> None:
    """List every configuration key, or check a configuration file with --check."""
    plugin_sections, warning = _plugin_sections()
    if warning:
        click.echo(f"warning: {warning}", err=True)
    if check_file is not None:
        try:
            _check(check_file, plugin_sections)
        except ConfigFileError as err:
            click.echo(f"error: {err}", err=True)
            ctx.exit(_CHECK_FAILED)
        except TierlogError as err:
            click.echo(f"error: {check_file}: {err}", err=True)
            ctx.exit(_CHECK_FAILED)
        click.echo(f"OK: {check_file}")
        return
    sections = [
        _Section("broker", "", BROKER_CONFIG),
        _Section("topic", "", TOPIC_CONFIG),
        *plugin_sections,
    ]
    if as_json:
        document = [
            {
                "section": section.title,
                "prefix": section.prefix,
                "keys": [_key_record(section.prefix, key) for key in section.definition],
            }
            for section in sections
        ]
        click.echo(json.dumps(document, indent=2))
        return
    _print_tables(sections)
