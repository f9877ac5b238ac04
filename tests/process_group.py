"""The processes one test starts, none of which may outlive it: `ProcessGroup`."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from typing import Any

__all__ = ["ProcessGroup"]


class ProcessGroup:
    """Processes started for one test and stopped together when it ends, whatever its outcome.

    A non-daemon child still running when pytest exits (a producer that serves forever, a
    consumer stuck on a failed test) makes multiprocessing wait for it at exit forever; daemons
    cannot start processes of their own. So a test's children are plain processes, and `stop`
    ends those still running: SIGTERM, then SIGKILL for any alive ``grace_s`` later.

    Args:
        context (multiprocessing.context.BaseContext): Starts the processes (e.g. spawn).
        grace_s (float): Seconds a terminated process has to exit before it is killed.
            Default 5.0.
    """

    def __init__(self, context: Any, grace_s: float = 5.0) -> None:
        self.context, self.grace_s = context, grace_s
        self.processes: list[mp.process.BaseProcess] = []

    def start(self, target: Callable[..., Any], *args: Any) -> mp.process.BaseProcess:
        """Start ``target(*args)`` in a new process of the group.

        Args:
            target (Callable): The process's body.
            *args: Its arguments.

        Returns:
            multiprocessing.Process: The started process.
        """
        process = self.context.Process(target=target, args=args)
        process.start()
        self.processes.append(process)
        return process

    def stop(self) -> list[str]:
        """End every process of the group still running (SIGTERM, SIGKILL after ``grace_s``)
        and wait for all.

        Returns:
            list[str]: The names of those that were still running, in start order.
        """
        running = [p for p in self.processes if p.is_alive()]
        for process in running:
            process.terminate()
        for process in running:
            process.join(self.grace_s)
            if process.is_alive():
                process.kill()
                process.join()
        for process in self.processes:
            process.join()
        return [process.name for process in running]
