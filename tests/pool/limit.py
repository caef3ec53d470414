# SPDX-License-Identifier: BSD-3-Clause
"""`pool-lock limit`: a test's own time limit, lock waits not counted.

ctest's TIMEOUT cannot pause, so a test that waited for the pool lock ran
out of time without having run.  This runs the test in a process group of
its own and keeps two clocks.

Rules it keeps:
 1. The test's clock stops while one of the test's processes is blocked on
    the pool lock (a "->" line of /proc/locks) and no process of the test
    holds it (holder.holders); checked every TICK seconds.
 2. A test that waits on itself, or hangs anywhere else, runs on its own
    clock and is stopped at its limit, with a line that says so.
 3. A test that waited longer than its wait limit is stopped, with a line
    naming the holder and since when it waited.
 4. Stopping is SIGTERM to the test's process group, SIGKILL GRACE seconds
    later; the pool-lock processes inside restore the pool on SIGTERM.
 5. A test that waited says, at its end, how long (counted apart).
 6. The harness inside writes its lines on this process's stderr, the
    test's log, not into a stderr the test captures and checks (where that
    stderr is a pipe or a terminal: POOL_LOCK_LOG).
"""
import os
import signal
import stat
import subprocess
import time

from holder import current_key, describe, holders, inside, lock_lines, now_text, say

TICK = 0.2
GRACE = 10


def exit_status(rc):
    return 128 - rc if rc < 0 else rc


def on_signals(handler):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


class Clock:
    """A test's own time and its time waiting on others for the lock."""

    def __init__(self, root):
        self.root, self.own, self.waited = root, 0.0, 0.0
        self.held_by, self.since, self.checked = None, None, 0.0

    def waiting_on_others(self):
        key = current_key()
        if key is None or not any(b and inside(p, self.root) for b, p in lock_lines(key)):
            self.held_by = None
            return False
        if self.held_by is None or time.monotonic() - self.checked > 5:
            self.held_by, self.checked = holders(key), time.monotonic()
            self.since = self.since or now_text()
        return not any(inside(p, self.root) for p in self.held_by)

    def tick(self, dt):
        if self.waiting_on_others():
            self.waited += dt
        else:
            self.own += dt
            self.since = None


def stop_group(child, why):
    say(why)
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        child.wait()


def watch(child, clock, args):
    last = time.monotonic()
    while child.poll() is None:
        time.sleep(TICK)
        now = time.monotonic()
        clock.tick(now - last)
        last = now
        if clock.own > args.seconds:
            stop_group(child, f"stopped the test: it ran past its own limit of {args.seconds:.0f} s "
                              f"(not counting {clock.waited:.1f} s waiting for the pool lock)")
            return 124
        if clock.waited > args.wait:
            stop_group(child, f"gave up: the test waited {clock.waited:.0f} s for the pool lock, held by "
                              f"{describe(clock.held_by)} since {clock.since}; stopped it")
            return 1
    return None


def log_for_harness():
    """POOL_LOCK_LOG (holder.say): this stderr, where reopening it by path
    shares it (a pipe, as ctest's, or a terminal); a regular file reopened
    would be written at another offset, so the harness keeps its own."""
    mode = os.fstat(2).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return {"POOL_LOCK_LOG": f"/proc/{os.getpid()}/fd/2"}
    return {}


def cmd_limit(args):
    os.environ.pop("POOL_LOCK_LOG", None)  # an outer launcher's: this one's lines are its own
    child = subprocess.Popen(args.command, process_group=0, env=dict(os.environ, **log_for_harness()))
    clock = Clock(os.getpid())

    def forward(sig, _frame):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
    on_signals(forward)
    rc = watch(child, clock, args)
    if clock.waited > 0:
        say(f"the test waited {clock.waited:.1f} s for the pool lock (not counted) and ran "
            f"{clock.own:.1f} s of its own limit of {args.seconds:.0f} s")
    return rc if rc is not None else exit_status(child.returncode)
