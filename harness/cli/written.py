"""Writing a set of bundled files for `init` and `dashboards export`: existing files are a
usage error (nothing written) unless --force, an unwritable directory names itself."""

from __future__ import annotations

from pathlib import Path

import click

# `init` and `dashboards export` write through write_or_refuse and take the same --force
force_option = click.option("--force", is_flag=True, help="Overwrite files that exist.")


def write_or_refuse(directory: Path, files: dict[str, bytes], force: bool) -> list[Path]:
    from layergate.harness.starter import StarterExistsError, write_files

    try:
        return write_files(directory, files, force)
    except StarterExistsError:  # a LayergateError: the group's handler says it
        raise
    except OSError as exc:
        raise click.BadParameter(f"cannot write: {exc}", param_hint="DIRECTORY") from exc
