"""Where a starter installs layergate from: the one owner of the requirement that `layergate
init` writes into its CI jobs and its Dockerfile.

A source is what the user names (`--install-from`) or, by default, where the running
layergate itself came from, read from its installed metadata (PEP 610's `direct_url.json`):

- a version, `0.1.0` or `layergate==0.1.0`: installed from a package index;
- a wheel or sdist file: copied into the starter's `wheels/`, so the path resolves in the
  repository the team commits (and in the image, which copies the starter);
- a git URL, `git+https://host/repo.git@ref` (any scheme pip takes after `git+`).

A layergate installed from a directory (`pip install .`, an editable checkout) has no source
a CI runner can reach: init then asks for `--install-from` rather than write a name that
does not resolve (`make dist` builds a wheel).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.metadata import Distribution, distributions
from pathlib import Path
from urllib.parse import unquote, urlparse

from layergate.exporters.errors import UsageError

DIST = "layergate"
WHEELS = "wheels"  # the starter's folder for a file source
ARCHIVES = (".whl", ".tar.gz", ".zip")
_VERSION = re.compile(r"^(?:layergate\s*==\s*)?(\d+(?:\.\d+)*(?:[a-z0-9.+!-]*))$", re.I)


class InstallSourceError(UsageError):
    """No source a fresh machine can install from; says which to give."""


@dataclass(frozen=True)
class InstallSource:
    """One way to install layergate: `kind` is version, file, git, or url (an archive
    installed from its URL)."""

    kind: str
    value: str  # the version, the file's path here, or the URL
    origin: str  # how it was found, for init's message

    def requirement(self, extras: str = "") -> str:
        """The pip requirement, with `extras` such as "[engine]"; a file is named by its
        path in the starter."""
        if self.kind == "version":
            return f"{DIST}{extras}=={self.value}"
        if self.kind == "file":
            return f"./{WHEELS}/{Path(self.value).name}{extras}"
        return f"{DIST}{extras} @ {self.value}"

    def files(self) -> dict[str, bytes]:
        """What the starter must carry for the requirement to resolve: a file source's
        archive under wheels/."""
        if self.kind != "file":
            return {}
        return {f"{WHEELS}/{Path(self.value).name}": Path(self.value).read_bytes()}


def given(value: str) -> InstallSource:
    """The source named by `--install-from`."""
    if value.startswith("git+"):
        return InstallSource("git", value, "--install-from")
    path = Path(value)
    if path.name.endswith(ARCHIVES):
        if not path.is_file():
            raise InstallSourceError(f"--install-from {value}: no such file")
        return InstallSource("file", str(path.resolve()), "--install-from")
    match = _VERSION.match(value.strip())
    if match:
        return InstallSource("version", match[1], "--install-from")
    raise InstallSourceError(
        f"--install-from {value!r} is none of a version (0.1.0), a wheel or sdist file "
        f"(*.whl, *.tar.gz) or a git URL (git+https://host/repo.git@ref)")


def installed() -> InstallSource:
    """Where the running layergate was installed from, as a source a CI runner can use."""
    dist = _installed_dist()
    raw = dist.read_text("direct_url.json")
    if raw is None:  # from an index: the same version resolves there
        return InstallSource("version", dist.version, "the package index it came from")
    direct = json.loads(raw)
    url = direct.get("url", "")
    if "vcs_info" in direct:
        vcs = direct["vcs_info"]
        ref = vcs.get("commit_id") or vcs.get("requested_revision")
        return InstallSource("git", f"{vcs['vcs']}+{url}{'@' + ref if ref else ''}",
                             "the git URL it was installed from")
    local = Path(unquote(urlparse(url).path)) if url.startswith("file:") else None
    if "archive_info" in direct and local is not None and local.is_file():
        return InstallSource("file", str(local), "the file it was installed from")
    if "archive_info" in direct and url and local is None:
        return InstallSource("url", url, "the URL it was installed from")
    where = local or url
    raise InstallSourceError(
        f"{DIST} was installed from {where}, which a CI runner or an image build does not "
        "have: give --install-from with a version on your package index, a wheel or sdist "
        "(`make dist` builds both into dist/) or a git URL (git+https://host/repo.git@ref)")


def _installed_dist() -> Distribution:
    """The installed distribution, not a checkout's `layergate.egg-info` that the working
    directory on sys.path may show first: the one with an install record wins."""
    found = list(distributions(name=DIST))
    if not found:
        raise InstallSourceError(f"{DIST} is not installed as a distribution here: give "
                                 "--install-from")
    return next((d for d in found if d.read_text("direct_url.json") is not None), found[0])
