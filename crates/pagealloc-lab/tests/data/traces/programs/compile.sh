#!/bin/sh
# A real compile: `make -j2` building a registry crate (itoa, no dependencies) twice,
# optimised and not, with rustc into a scratch directory.
# Usage: compile.sh REGISTRY_SRC_DIR (e.g. ~/.cargo/registry/src/index.crates.io-*)
set -e
reg=${1:?usage: compile.sh REGISTRY_SRC_DIR}
tmp=$(mktemp -d)
cat > "$tmp/Makefile" <<MK
all: libitoa.rlib libitoa-debug.rlib
libitoa.rlib:
	rustc --edition 2021 -O --crate-type lib --crate-name itoa $reg/itoa-1.0.18/src/lib.rs -o \$@
libitoa-debug.rlib:
	rustc --edition 2021 --crate-type lib --crate-name itoa $reg/itoa-1.0.18/src/lib.rs -o \$@
MK
make -s -j2 -C "$tmp"
rm -rf "$tmp"
