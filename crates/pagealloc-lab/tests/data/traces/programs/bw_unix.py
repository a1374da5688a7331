"""lmbench bw_unix: a writer process sends MiB of data in 64 KiB writes over an
AF_UNIX stream socketpair to a reader process; writer pinned to CPU 0, reader to CPU 1.
Usage: bw_unix.py [MiB]"""
import os
import socket
import sys

MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 64
XFER = 64 * 1024
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
total = MIB << 20
pid = os.fork()
if pid == 0:
    os.sched_setaffinity(0, {1})
    a.close()
    got = 0
    buf = bytearray(XFER)
    while got < total:
        n = b.recv_into(buf, XFER)
        if n == 0:
            break
        got += n
    os._exit(0 if got == total else 1)
os.sched_setaffinity(0, {0})
b.close()
chunk = b"x" * XFER
for _ in range(total // XFER):
    a.sendall(chunk)
a.close()
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
