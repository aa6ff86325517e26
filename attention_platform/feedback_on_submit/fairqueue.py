"""The queue of attempts waiting to be graded: fair between students.

Students take turns: each student with waiting attempts has a place in a round, in the order
their first waiting attempt arrived; the next attempt to grade is the oldest waiting attempt of
the first student in the round who has none being graded, and that student then goes to the
end of the round. So a burst of submits by different students drains in the order they
arrived, and a student who submits fifty times gets one attempt graded per round, as everyone
else does, and never two at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Generic, Hashable, TypeVar

Item = TypeVar("Item")


class FairQueue(Generic[Item]):
    def __init__(self):
        self._waiting: "OrderedDict[Hashable, deque[Item]]" = OrderedDict()  # the round, in turn order
        self._busy: set = set()
        self._lock = threading.Lock()  # the grader's workers ask for positions while it takes and puts

    def put(self, student: Hashable, item: Item) -> None:
        with self._lock:
            self._waiting.setdefault(student, deque()).append(item)

    def retry(self, student: Hashable, item: Item) -> None:
        """``item`` could not be graded for a reason not its own: first of its student's again."""
        with self._lock:
            self._waiting.setdefault(student, deque()).appendleft(item)

    def take(self) -> tuple[Hashable, Item] | None:
        """The next attempt to grade (its student is then busy until :meth:`done`), or None."""
        with self._lock:
            for student, items in self._waiting.items():
                if student in self._busy:
                    continue
                item = items.popleft()
                self._busy.add(student)
                del self._waiting[student]
                if items:
                    self._waiting[student] = items  # to the end of the round
                return student, item
            return None

    def done(self, student: Hashable) -> None:
        with self._lock:
            self._busy.discard(student)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(items) for items in self._waiting.values())

    def waiting(self, student: Hashable) -> list[Item]:
        with self._lock:
            return list(self._waiting.get(student, ()))

    def position(self, student: Hashable) -> int | None:
        """How many students' attempts will be started before this student's next one."""
        with self._lock:
            if student not in self._waiting:
                return None
            ahead = 0
            for other in self._waiting:
                if other == student:
                    return ahead
                if other not in self._busy:
                    ahead += 1
            return ahead
