# SPDX-License-Identifier: BSD-3-Clause
"""The machine-wide pool lock: taking it, and who holds it.

Rules it keeps:
 1. One lock: an exclusive flock(2) on /tmp/hugepool-pool.lock (opened
    O_NOFOLLOW), held for as long as the pool is set.
 2. A taker that must wait says so on stderr (under `pool-lock limit`, on
    the launcher's: POOL_LOCK_LOG), with the holder and the time
    ("waiting for the pool lock held by pid N (cmd) since T"), and again
    when it has the lock.  With a wait limit it gives up after it and says
    for whom it waited.
 3. The holder is found in the kernel: every process with a descriptor on
    the locked open file (a "lock:" line in /proc/PID/fdinfo), the one that
    started the others named first.  /proc/locks names the process that
    called flock, which may have exited (flock(1) on an inherited
    descriptor): it is used only when no holder is visible.
 4. A taker whose own ancestor holds the lock would wait forever: it fails
    at once and says so.
"""
import fcntl
import os
import signal
import sys
import time

LOCK = "/tmp/hugepool-pool.lock"


def say(msg):
    """To the test's log, not into the command's stderr a test may check:
    under `pool-lock limit`, POOL_LOCK_LOG names its stderr."""
    line = f"pool-lock: {msg}\n"
    log = os.environ.get("POOL_LOCK_LOG")
    if log:
        try:
            with open(log, "a") as f:
                f.write(line)
            return
        except OSError:
            pass
    sys.stderr.write(line)
    sys.stderr.flush()


def now_text():
    return time.strftime("%Y-%m-%d %H:%M:%S")


# ---- processes ------------------------------------------------------------

def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    return text if len(text) <= 160 else text[:157] + "..."


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def lineage(pid):
    """pid and its ancestors, nearest first."""
    out = []
    while pid > 0 and pid not in out and len(out) < 4096:
        out.append(pid)
        pid = parent(pid)
    return out


def inside(pid, root):
    return root in lineage(pid)


def all_pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


# ---- who holds the lock (rule 3) ------------------------------------------

def lock_key(st):
    """The lock file as /proc/locks writes it: MAJOR:MINOR:INODE."""
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def current_key():
    try:
        return lock_key(os.stat(LOCK, follow_symlinks=False))
    except OSError:
        return None


def lock_lines(key):
    """(blocked, pid) for each line of /proc/locks about the lock file."""
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if key in fields[1:]:
                at = fields.index(key)
                yield "->" in fields[:at], int(fields[at - 1])


def shares_lock(pid, key):
    """Whether one of pid's descriptors is the open file that holds the lock."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != LOCK:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        if any(line.startswith("lock:") and f" {key} " in line for line in info.splitlines()):
            return True
    return False


def holders(key):
    """Processes holding the lock; the first one is the one that started the
    others (no holder among its ancestors)."""
    found = [pid for pid in all_pids() if shares_lock(pid, key)]
    if not found:  # another pid namespace, or gone: what /proc/locks says
        found = [pid for blocked, pid in lock_lines(key) if not blocked]
    roots = [p for p in found if not any(a in found for a in lineage(p)[1:])]
    return roots + [p for p in found if p not in roots]


def describe(pids):
    if not pids:
        return "a process this namespace cannot see"
    first = pids[0]
    cmd = cmdline(first)
    text = f"pid {first} ({cmd})" if cmd is not None else f"pid {first} (exited or not visible here)"
    if cmd is not None and "pool-lock" in cmd:  # the harness: name what it serves
        up = parent(first)
        text += f" for pid {up} ({cmdline(up)})"
    if len(pids) > 1:
        text += f" and {len(pids) - 1} process(es) sharing its descriptor"
    return text


# ---- taking the lock (rules 1, 2, 4) --------------------------------------

class Timeout(Exception):
    pass


def block(fd, wait):
    if wait is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return

    def expired(_sig, _frame):
        raise Timeout()
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, wait)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def try_take(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def take(wait=None):
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    key = lock_key(os.fstat(fd))
    held_by = []
    while not held_by:  # (a holder that let go meanwhile is not named)
        if try_take(fd):
            return fd
        held_by = holders(key)
    mine = [p for p in held_by if p in lineage(os.getpid())]
    if mine:
        raise SystemExit(f"pool-lock: the pool lock is held by this process's own ancestor, "
                         f"{describe(mine)}: taking it again would wait forever")
    say(f"waiting for the pool lock held by {describe(held_by)} since {now_text()}")
    start = time.monotonic()
    try:
        block(fd, wait)
    except Timeout:
        raise SystemExit(f"pool-lock: gave up after waiting {wait:.0f} s for the pool lock, "
                         f"held by {describe(holders(key))}") from None
    say(f"got the pool lock after {time.monotonic() - start:.1f} s")
    return fd


# ---- the pool (rules 5, 6) ------------------------------------------------
