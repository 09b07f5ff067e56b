"""The errors a `spark-log` command reports: one line on stderr and a non-zero exit code.

`CliError` is an operational failure (exit 1: unknown topic, unreachable broker, a refusal by
the broker); `UsageError` a bad combination of flags that argparse cannot see (exit 2, as
argparse exits for the flags it checks itself). `from_kafka` turns a librdkafka error into a
CliError that names the broker's error code.
"""

from __future__ import annotations

from typing import Any

EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A command failed; `message` is printed as `error: <message>`."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """Flags that do not go together, or a malformed flag value."""

    exit_code = EXIT_USAGE


def kafka_error_text(exc: BaseException) -> str:
    """`UNKNOWN_TOPIC_OR_PART: Broker: Unknown topic or partition` for a KafkaException."""
    err: Any = exc.args[0] if exc.args else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        return f"{err.name()}: {err.str()}"
    return str(exc)


def error_name(exc: BaseException) -> str | None:
    """The librdkafka error name of a KafkaException (UNKNOWN_TOPIC_OR_PART ...), else None."""
    err: Any = exc.args[0] if exc.args else None
    return err.name() if err is not None and hasattr(err, "name") else None


def from_kafka(what: str, exc: BaseException) -> CliError:
    return CliError(f"{what}: {kafka_error_text(exc)}")
