"""Names the exactly-once sink gives to its Kafka objects, all derived from the query's prefix
(`txn_options.resolve_prefix`), and the reference to one open transaction.

* `<prefix>-task-<n>`: the transactional id of write task n (Spark's partition id). The same id
  serves every attempt of task n in every micro-batch, so an attempt's InitProducerId fences
  every earlier attempt of that task (retries, zombies) and aborts what it left open.
* `<prefix>-barrier`: the id of the batch barrier (`batch_barrier`).
* `<prefix>.sink`: the consumer group whose committed offset on `__pylog_sink_commits`
  partition 0 points at the query's latest commit decision (`commit_log`).
"""

from __future__ import annotations

from dataclasses import dataclass

COMMITS_TOPIC = "__pylog_sink_commits"


@dataclass(frozen=True, slots=True)
class TxnRef:
    """One transaction that was left open to be ended elsewhere: what EndTxn needs.
    Invariant: (producer_id, epoch) are the ones the transaction was written with."""

    transactional_id: str
    producer_id: int
    epoch: int
    task: int = -1  # Spark partition id of the write task; -1 for the barrier

    def to_json(self) -> list[str | int]:
        return [self.transactional_id, self.producer_id, self.epoch, self.task]

    @staticmethod
    def from_json(value: list[str | int]) -> TxnRef:
        tid, pid, epoch, task = value
        return TxnRef(str(tid), int(pid), int(epoch), int(task))


def task_id(prefix: str, partition: int) -> str:
    return f"{prefix}-task-{partition}"


def task_prefix(prefix: str) -> str:
    return f"{prefix}-task-"


def is_task_id(prefix: str, transactional_id: str) -> bool:
    """Whether `transactional_id` is one of the query's task ids (and not, say, a task id of
    another query whose prefix happens to start with `<prefix>-task-`)."""
    rest = transactional_id.removeprefix(task_prefix(prefix))
    return rest != transactional_id and rest.isdigit()


def barrier_id(prefix: str) -> str:
    return f"{prefix}-barrier"


def state_group(prefix: str) -> str:
    return f"{prefix}.sink"
