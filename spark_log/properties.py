"""Java-style `.properties` files and `ConfigError`: a setting, or a small file of settings or
state, that cannot be used as it is. The message names the key or the file and what is wrong.

Shared by the broker (its settings), storage (meta.properties and the other files a data
directory holds besides its logs) and the CLI (client settings files), so none of them has to
import another for it.
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A setting that is unknown or has an invalid value, or a file that cannot be used; the
    message names the key or the file."""


def read_properties_file(path: Path) -> dict[str, str]:
    """Parse a Java-style .properties file (key=value or key: value, # and ! comments)."""
    props: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        sep = min((i for i in (text.find("="), text.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{number}: expected key=value, got {text!r}")
        props[text[:sep].strip()] = text[sep + 1 :].strip()
    return props
