# SPDX-License-Identifier: BSD-3-Clause
"""What gpu-torch.py and gpu-cupy.py share (bench/suites/gpu): a measurement
in a process of its own, a target's PASS or FAIL line, and sections run so
that one failing does not hide the others."""
import json
import subprocess


def run_child(cmd, env=None):
    """Runs cmd; its last line of stdout is JSON.  What it printed on stderr
    (hugepool's lines, the program's) is echoed as part of the record.
    RuntimeError with the end of stderr when it fails."""
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[-1]} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    if out.stderr.strip():
        print("\n".join(f"  stderr: {line}" for line in out.stderr.strip().splitlines()[-6:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def target(what, ok, detail):
    print(f"target: {'PASS' if ok else 'FAIL'} {what} ({detail})")


def run_sections(sections, run):
    """Calls each (label, section) of sections with run; one that fails prints
    a FAIL line with its label.  0, or 1 when any failed."""
    rc = 0
    for label, section in sections:
        try:
            section(run)
        except (RuntimeError, KeyError, ValueError, subprocess.TimeoutExpired) as e:
            print(f"target: FAIL {label}: {e}")
            rc = 1
    return rc
