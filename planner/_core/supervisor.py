"""The supervisor of one run of a `command:` trainable: the command and every process it starts end
with it.

Run by `planner._trial.processes` as a script of its own, between the Ray
worker and the command (`python -P supervisor.py STATUS_FD GRACE_S PARENT_PID
-- argv...`), so that the worker itself never becomes the reaper of unrelated
processes; `plan validate`'s `--help` probe of an argparse script runs under it
too (planner._contract.command_help). It imports nothing of planner's (only the
standard library and psutil), and `-P` keeps its own folder off `sys.path`.

- It is two processes: the one its parent started (the *relay*) forks the
  supervisor proper and only passes a stop on to it, waits for it, and exits
  with its status. A Ray worker that exits SIGKILLs its direct children
  (Ray's `kill_child_processes_on_worker_exit`): that kills the relay, never
  the supervisor, which is told by the kernel (`PR_SET_PDEATHSIG` on the
  relay) and ends the tree before it exits. The relay is a subreaper too, and
  ends whatever is left under it once the supervisor has gone.

- It makes itself Linux's *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`):
  a process the command starts that leaves its parent behind (a double fork, a
  daemon, a `setsid` child whose parent exited) is re-parented to the
  supervisor instead of to init, so every descendant of the command stays in
  the supervisor's process tree, where it is measured (`max_trial_memory`
  counts the whole tree) and ended. Where the call is not available (another
  OS), the tree is still walked and ended, but a double-forked process escapes.
- It starts the command (`posix_spawnp`), tells the worker its pid on
  STATUS_FD (`{"pid": N}` or `{"error": ..., "errno": N}` when it cannot
  start), and reaps every process re-parented to it.
- When the command exits, or when the supervisor is asked to stop (SIGTERM,
  SIGINT, SIGHUP, or its parent, the worker, dying: `PR_SET_PDEATHSIG`), every
  descendant still there gets SIGTERM, and SIGKILL after GRACE_S; then it
  writes `{"exit": returncode}` (negative: the signal that ended the command,
  as `subprocess` says it) on STATUS_FD and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.02
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what asks the supervisor to end the tree
# past the grace: a process that survives SIGKILL this long (in the kernel, D state) is left
GIVE_UP_S = 10.0


_LIBC: list = []


def libc():
    """The C library this process runs on, loaded once (the process's own symbols, `dlopen(NULL)`:
    no `ctypes.util.find_library`, which runs `ldconfig` in a subprocess each call). A function it
    lacks (`prctl` off Linux) is an AttributeError."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _prctl(option: int, value: int) -> bool:
    try:
        return libc().prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def has_children() -> bool:
    """Whether this process has a child, living or ended and not yet reaped, in one system call
    that reaps nothing (`waitid` with WNOWAIT). With no child there is no descendant to end (a
    subreaper's orphaned descendants become its children), so the process table need not be read."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid here: ask the table
        return bool(descendants(process_table(), os.getpid()))
    return True


def process_table() -> dict[int, tuple[int, bool]]:
    """Every process this one can see: pid -> (parent pid, whether it is a zombie), in one pass
    over Linux's /proc (each `stat` file read once); elsewhere psutil's view of the same.

    Not `psutil.process_iter` on Linux: it builds an object and reads more than `stat` for each
    process, several times this pass's cost (docs/speed.md), and ending a trial's tree reads the
    table once a look."""
    if not os.path.isdir("/proc/self"):
        return {
            p.pid: (p.info["ppid"] or 0, p.info["status"] == psutil.STATUS_ZOMBIE)
            for p in psutil.process_iter(["ppid", "status"])
        }
    table: dict[int, tuple[int, bool]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:
            continue  # it ended between the listing and the open
        try:
            data = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        try:  # "pid (comm) S ppid ...": comm may hold ")"
            state, ppid = data[data.rfind(b")") + 2 :].split(b" ", 2)[:2]
            table[int(name)] = (int(ppid), state == b"Z")
        except ValueError:
            continue  # an empty or cut read: a process that was ending
    return table


def descendants(table: dict[int, tuple[int, bool]], root: int) -> list[int]:
    """The pids under `root` in `table` (children first, then theirs)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, seen, frontier = [], {root}, [root]
    while frontier:  # `seen`: a pid reused while the table was read can make it a cycle
        below = [
            child for parent in frontier for child in children.get(parent, ()) if child not in seen
        ]
        seen.update(below)
        found += below
        frontier = below
    return found


class Supervisor:
    def __init__(self, status_fd: int, grace_s: float):
        self.status_fd = status_fd
        self.grace_s = grace_s
        self.stop_requested = False
        self.child: int | None = None
        self.status: int | None = None  # the command's wait status, once reaped

    def request_stop(self, signum, frame) -> None:
        self.stop_requested = True

    def send(self, message: dict) -> None:
        try:
            os.write(self.status_fd, (json.dumps(message) + "\n").encode())
        except OSError:
            pass  # the worker is gone: the tree is still ended

    def spawn(self, argv: list[str]) -> bool:
        os.set_inheritable(self.status_fd, False)  # the command never sees the status pipe
        try:
            self.child = os.posix_spawnp(
                argv[0], argv, os.environ, setsigdef=(signal.SIGPIPE, *STOPS), setsigmask=()
            )
        except OSError as error:
            self.send({"error": error.strerror or str(error), "errno": error.errno or 0})
            return False
        self.send({"pid": self.child, "supervisor": os.getpid()})
        return True

    def reap(self) -> None:
        """Collect every child that ended (the command, or an orphan re-parented here)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.status = status

    def wait(self) -> None:
        """Until the command exits or a stop is asked for."""
        while self.status is None and not self.stop_requested:
            self.reap()
            if self.status is None and not self.stop_requested:
                time.sleep(POLL_S)

    def end_tree(self) -> None:
        """SIGTERM every descendant, SIGKILL what is left after the grace, until none is left."""
        end_descendants(self.grace_s, self.reap)

    def returncode(self) -> int | None:
        if self.status is None:
            return None
        return (
            -os.WTERMSIG(self.status)
            if os.WIFSIGNALED(self.status)
            else os.WEXITSTATUS(self.status)
        )


def end_descendants(grace_s: float, reap=None, spare: frozenset[int] = frozenset()) -> None:
    """SIGTERM every descendant of this process but those in `spare`, SIGKILL what is left after
    `grace_s`, until none is left (or GIVE_UP_S past the grace). `reap()` collects the ended
    children between looks; without it, the ended children not in `spare` are reaped by pid (never
    `waitpid(-1)`). One look is one pass over the process table."""
    me = os.getpid()
    termed: set[int] = set()
    deadline = time.monotonic() + grace_s
    while True:
        if reap is not None:
            reap()
        table = process_table()
        living = []
        for pid in descendants(table, me):
            if pid in spare:
                continue
            if not table[pid][1]:
                living.append(pid)
            elif reap is None and table[pid][0] == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not living:
            break
        now = time.monotonic()
        if now > deadline + GIVE_UP_S:
            break
        for pid in living:
            sig = signal.SIGKILL if now >= deadline else signal.SIGTERM
            if sig == signal.SIGTERM and pid in termed:
                continue
            termed.add(pid)
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(POLL_S)
    if reap is not None:
        reap()


def become_subreaper() -> bool:
    """This process becomes Linux's child subreaper: what its descendants orphan is re-parented to
    it."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def main(args: list[str]) -> int:
    status_fd, grace_s, parent = int(args[0]), float(args[1]), int(args[2])
    command = args[4:] if len(args) > 3 and args[3] == "--" else args[3:]
    relay = Supervisor(status_fd, grace_s)
    for sig in STOPS:
        signal.signal(sig, relay.request_stop)
    signal.pthread_sigmask(
        signal.SIG_UNBLOCK, STOPS
    )  # a thread that blocks them may have started this one
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the worker died before the line above: nobody waits for this run
        return 1
    me = os.getpid()
    relay.child = os.fork()
    if relay.child == 0:  # the supervisor proper: the command's parent and subreaper
        os._exit(supervise(status_fd, grace_s, me, command))
    os.set_inheritable(status_fd, False)
    os.close(status_fd)  # the supervisor's alone: its end tells the worker the run is over
    relay.wait()
    if (
        relay.status is None
    ):  # asked to stop: the supervisor ends the tree within its grace, then exits
        with contextlib.suppress(ProcessLookupError):
            os.kill(relay.child, signal.SIGTERM)
        deadline = time.monotonic() + grace_s + GIVE_UP_S
        while relay.status is None and time.monotonic() < deadline:
            relay.reap()
            time.sleep(POLL_S)
    relay.end_tree()  # whatever the supervisor left (it was killed): re-parented here
    code = relay.returncode()
    if code is None:
        return 125
    return 128 - code if code < 0 else code


def supervise(status_fd: int, grace_s: float, relay: int, command: list[str]) -> int:
    """The supervisor proper, forked by the relay: start the command, wait, end the tree, say how
    it ended."""
    supervisor = Supervisor(status_fd, grace_s)
    for sig in STOPS:
        signal.signal(sig, supervisor.request_stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(
        PR_SET_PDEATHSIG, signal.SIGTERM
    )  # the relay killed (by Ray, with its worker): end the tree
    if os.getppid() != relay:  # the relay died before the line above
        return 1
    if not command or not supervisor.spawn(command):
        return 127
    supervisor.wait()
    supervisor.end_tree()
    code = supervisor.returncode()
    supervisor.send({"exit": code})
    if code is None:  # the command could not be reaped (stuck in the kernel past SIGKILL)
        return 125
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
