#!/bin/sh
# What an SCTP stream message costs and allocates on a real Linux kernel, beside TCP's:
# boots Debian bookworm's 6.1 kernel (which builds SCTP as a module; the live kernel here
# has no SCTP) under QEMU (2 GiB; ACCEL below) from an initramfs of busybox and
# scripts/sctp_vm_bench.c, and runs netperf SCTP_STREAM's method (send() of MSG-byte
# messages on a one-to-one SCTP socket over loopback, the receiver recv()s) and TCP's,
# alternating, with the ends on one CPU (and on two with 2 vCPUs); then once more of each under tracefs
# (kmem:mm_page_alloc / mm_page_free / mm_page_free_batched), blocks counted per
# message by task, CPU, order, migratetype and gfp flags. Not run by CI; the figures and
# their use: docs/sim-cost-model.md §10 (netperf).
#
# usage: scripts/sctp_vm.sh [ROUNDS [MESSAGES]]    (default 3 rounds of 2 000 messages)
# env: SCRATCH (default /tmp/sctp: the kernel, modules, busybox, initramfs, ~12 MB kept),
#      KVER (default: the newest linux-image-6.1.0-*-amd64-unsigned apt knows),
#      TRACED (messages per traced run, default 5000),
#      ACCEL: tcg (default: two vCPUs, multi-threaded TCG; the guest's clock is the
#      host's, so its timings move with the host's load), icount (one vCPU, guest time
#      = instructions: the timings docs/sctp-vm.md uses) or kvm (a host whose KVM
#      boots a stock kernel; this machine's nested PVM does not).
# The figures in docs/sctp-vm.md: ACCEL=icount TRACED=2000 scripts/sctp_vm.sh 3 2000
# (timings, one CPU) and ACCEL=tcg TRACED=10000 scripts/sctp_vm.sh 1 2000 (blocks, two CPUs).
# Output: the VM's console on stdout ("result ..." lines per timed run, "trace ..." lines
# per traced run: count per message). Needs qemu-system-x86_64, gcc with a static libc,
# apt-get download and dpkg-deb (/dev/kvm only for ACCEL=kvm).
set -eu
ROUNDS=${1:-3}
MESSAGES=${2:-2000}
TRACED=${TRACED:-5000}
ACCEL=${ACCEL:-tcg}
# icount (instructions as time: a figure the host's load cannot move) hangs bringing up
# a second vCPU, so it runs one: both ends on CPU 0 only.
if [ "$ACCEL" = icount ]; then SMP=1; LAST=0; else SMP=2; LAST=1; fi
MODES='"0 0"'
SPECS='"sctp 10240 0 0" "tcp 10240 0 0" "tcp 16384 0 0"'
if [ $SMP = 2 ]; then
    MODES="$MODES \"0 1\""
    SPECS="$SPECS \"sctp 10240 0 1\" \"tcp 10240 0 1\" \"tcp 16384 0 1\""
fi
SCRATCH=${SCRATCH:-/tmp/sctp}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$SCRATCH/keep"
cd "$SCRATCH"

if [ ! -f keep/vmlinuz ]; then
    KVER=${KVER:-$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' |
        cut -d' ' -f1 | sort -V | tail -1)}
    apt-get download "$KVER" busybox-static
    rm -rf k bb
    dpkg-deb -x linux-image-*.deb k
    dpkg-deb -x busybox-static_*.deb bb
    M=$(echo k/lib/modules/*/kernel)
    cp k/boot/vmlinuz-* keep/vmlinuz
    # sctp's dependencies (modules.dep is built on install: the order is by hand).
    cp "$M/arch/x86/crypto/crc32c-intel.ko" "$M/crypto/crc32c_generic.ko" "$M/lib/libcrc32c.ko" \
        "$M/net/ipv4/udp_tunnel.ko" "$M/net/ipv6/ip6_udp_tunnel.ko" "$M/net/sctp/sctp.ko" keep/
    cp bb/bin/busybox keep/
    rm -rf k bb ./*.deb
fi

gcc -O2 -static -o keep/stream_bench "$HERE/sctp_vm_bench.c"

rm -rf root
mkdir -p root/bin root/mod root/proc root/sys root/dev root/tmp
cp keep/busybox keep/stream_bench root/bin/
cp keep/*.ko root/mod/
cat > root/init <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null || true
mount -t tracefs tracefs /sys/kernel/tracing
for m in crc32c-intel crc32c_generic libcrc32c udp_tunnel ip6_udp_tunnel sctp; do
    insmod /mod/\$m.ko || echo "insmod \$m failed"
done
ip link set lo up
echo "vm: \$(uname -r), \$(nproc) CPUs, \$(grep MemTotal /proc/meminfo)"
grep -H . /proc/sys/net/core/rmem_default /proc/sys/net/core/wmem_default \
    /proc/sys/net/sctp/sctp_rmem /proc/sys/net/sctp/sctp_wmem /proc/sys/net/ipv4/tcp_rmem \
    /proc/sys/net/ipv4/tcp_wmem
port=5000
run() { # proto bytes messages sender_cpu receiver_cpu
    port=\$((port + 1))
    stream_bench \$1 \$2 \$3 \$4 \$5 \$port | grep result
}
# A warm-up of each, then ROUNDS rounds alternating SCTP and TCP (the order rotated).
run sctp 10240 $TRACED 0 $LAST; run tcp 10240 $TRACED 0 $LAST
r=0
while [ \$r -lt $ROUNDS ]; do
    r=\$((r + 1))
    for cpus in $MODES; do
        if [ \$((r % 2)) -eq 1 ]; then
            run sctp 10240 $MESSAGES \$cpus; run tcp 10240 $MESSAGES \$cpus; run tcp 16384 $MESSAGES \$cpus
        else
            run tcp 16384 $MESSAGES \$cpus; run tcp 10240 $MESSAGES \$cpus; run sctp 10240 $MESSAGES \$cpus
        fi
    done
done
# Traced runs: every page block allocated and freed, counted per message.
T=/sys/kernel/tracing
echo 65536 > \$T/buffer_size_kb
for ev in mm_page_alloc mm_page_free mm_page_free_batched; do
    echo 1 > \$T/events/kmem/\$ev/enable
done
for spec in $SPECS; do
    set -- \$spec
    echo > \$T/trace
    port=\$((port + 1))
    echo 1 > \$T/tracing_on
    stream_bench \$1 \$2 $TRACED \$3 \$4 \$port > /tmp/out
    echo 0 > \$T/tracing_on
    grep result /tmp/out
    pids=\$(grep pids /tmp/out)
    spid=\$(echo \$pids | cut -d' ' -f3); rpid=\$(echo \$pids | cut -d' ' -f5)
    grep -H overrun \$T/per_cpu/cpu*/stats | grep -v ': 0' || true
    awk -v spid=\$spid -v rpid=\$rpid -v n=$TRACED -v tag="\$spec" '
        / mm_page_(alloc|free|free_batched): / {
            task = \$1; pid = task; sub(/.*-/, "", pid); sub(/-[0-9]+\$/, "", task)
            role = (pid == spid) ? "sender" : (pid == rpid) ? "receiver" : task
            cpu = \$2; gsub(/[\[\]]/, "", cpu)
            ev = ""; ord = "order=0"; mt = ""; gfp = ""
            for (i = 3; i <= NF; i++) {
                if (\$i ~ /^mm_page_/) ev = \$i
                else if (\$i ~ /^order=/) ord = \$i
                else if (\$i ~ /^migratetype=/) mt = \$i
                else if (\$i ~ /^gfp_flags=/) gfp = \$i
            }
            c[tag " " role " cpu" cpu " " ev " " ord " " mt " " gfp]++
        }
        END { for (k in c) printf "trace %s %d %.4f/msg\n", k, c[k], c[k] / n }
    ' \$T/trace | sort
done
echo vm: done
poweroff -f
EOF
chmod +x root/init
(cd root && find . | ../keep/busybox cpio -o -H newc 2>/dev/null | gzip -1 > ../initrd.gz)

echo "host: $(uptime)"
case $ACCEL in
kvm) CPU="-enable-kvm -cpu host,-arch-capabilities" ;;
tcg) CPU="-accel tcg,thread=multi -cpu max" ;;
*) CPU="-accel tcg,thread=single -icount shift=0,sleep=off -cpu max" ;;
esac
# shellcheck disable=SC2086
qemu-system-x86_64 $CPU -smp $SMP -m 2048 -nographic -no-reboot -net none \
    -kernel keep/vmlinuz -initrd initrd.gz \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init" </dev/null
echo "host: $(uptime)"
