#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""devlog_listen.py SOCKET OUTFILE: receive syslog datagrams on SOCKET (e.g.
/dev/log while no logger runs) and append each as one line to OUTFILE, until
SIGTERM.  Prints 'ready' once bound."""
import os
import signal
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
os.chmod(path, 0o666)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
with open(out, "ab", buffering=0) as f:
    while True:
        data = sock.recv(65536)
        f.write(data.rstrip(b"\0\n") + b"\n")
