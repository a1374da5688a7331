"""A memory-hungry program: maps MiB of anonymous memory (THP-eligible), writes every
page, frees it, LOOPS times. Usage: memhog.py [MiB] [LOOPS]"""
import mmap
import sys

MIB = int(sys.argv[1]) if len(sys.argv) > 1 else 256
LOOPS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
for _ in range(LOOPS):
    m = mmap.mmap(-1, MIB << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE)
    for i in range(0, MIB << 20, 4096):
        m[i] = 1
    m.close()
