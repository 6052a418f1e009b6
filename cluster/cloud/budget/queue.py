"""The budget's waiting room: interactive before bulk, round-robin across projects, FIFO within one."""

from __future__ import annotations

from collections import OrderedDict, deque

from cluster.cloud.budget.model import Priority

__all__ = ["FairQueue"]


class FairQueue:
    """Tickets waiting for a permit. `enqueue` hands one out; `pop_next` takes the one whose turn it is."""

    def __init__(self) -> None:
        # priority -> project -> its tickets in arrival order; a project's place is its turn in the round.
        self._queues: dict[Priority, OrderedDict[str, deque[int]]] = {p: OrderedDict() for p in Priority}
        self._waiting_at: dict[int, tuple[Priority, str]] = {}
        self._next_ticket = 1

    def __bool__(self) -> bool:
        return bool(self._waiting_at)

    def __len__(self) -> int:
        return len(self._waiting_at)

    def enqueue(self, project: str, priority: Priority) -> int:
        """Queue one waiter and return its ticket (tickets count up from 1)."""
        priority = Priority(priority)  # a plain "bulk" from across an actor boundary works too
        ticket = self._next_ticket
        self._next_ticket += 1
        self._queues[priority].setdefault(project, deque()).append(ticket)
        self._waiting_at[ticket] = (priority, project)
        return ticket

    def cancel(self, ticket: int) -> None:
        """Drop a waiting ticket; no-op if it is not waiting (already popped, or unknown)."""
        where = self._waiting_at.pop(ticket, None)
        if where is None:
            return
        priority, project = where
        queue = self._queues[priority][project]
        queue.remove(ticket)
        if not queue:
            del self._queues[priority][project]

    def pop_next(self) -> int:
        """Interactive before bulk; round-robin across projects; FIFO within a project."""
        for priority in (Priority.INTERACTIVE, Priority.BULK):
            queues = self._queues[priority]
            if not queues:
                continue
            project, queue = next(iter(queues.items()))
            ticket = queue.popleft()
            if queue:
                queues.move_to_end(project)
            else:
                del queues[project]
            del self._waiting_at[ticket]
            return ticket
        raise LookupError("no waiter to grant")  # callers check first; reaching here is a bug

    def counts(self) -> dict[str, dict[str, int]]:
        """project -> priority value -> waiting tickets."""
        waiting: dict[str, dict[str, int]] = {}
        for priority, queues in self._queues.items():
            for project, queue in queues.items():
                waiting.setdefault(project, {})[priority.value] = len(queue)
        return waiting
