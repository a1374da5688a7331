#!/bin/sh
# A TCP stream over loopback: iperf3 (Debian's) server on CPU 1, client on CPU 0,
# 10 KB writes, 64 MiB in all, bound to 127.0.0.1 only.
iperf3 -s -1 -B 127.0.0.1 -p 5399 -A 1 >/dev/null 2>&1 &
srv=$!
sleep 0.3
iperf3 -c 127.0.0.1 -p 5399 -A 0 -l 10K -n 64M >/dev/null
rc=$?
wait $srv
exit $rc
