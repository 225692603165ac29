"""Errors that carry their exit code (`exporters.catalogue.ExitCode`), as click's exceptions
carry theirs: a module that finds a bad traffic line, policy or configuration, or a run
directory or store it cannot read, raises one of these and never decides how the process
ends. The `layergate` group (harness/cli/__init__.py) turns any of them into
`layergate COMMAND: error: MESSAGE` on stderr and the code.

They live in the bottom layer because the traffic reader is here; every room above
imports them downwards."""

from __future__ import annotations

from typing import ClassVar

from layergate.exporters.catalogue import ExitCode


class LayergateError(Exception):
    """An error whose message says what is wrong and where, and whose `exit_code` says how
    the command ends."""

    exit_code: ClassVar[ExitCode]


class UsageError(LayergateError):
    """What was given cannot be used: an option, a policy, a configuration, a traffic file or
    mix."""

    exit_code = ExitCode.USAGE


class InfrastructureError(LayergateError):
    """Something outside layergate could not be read or reached: a run directory, a results
    store, an arm, a worker, Grafana, a process of the stack."""

    exit_code = ExitCode.INFRASTRUCTURE
