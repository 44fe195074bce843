#!/usr/bin/env bash
# A Debian 13 (trixie) root with python3-torch 2.6 (Python 3.13), from the
# same Debian archive as the machine, so tests can run a real torch 2.x job
# next to the machine's own torch 1.13. As root.
#
#   scripts/torch-root.sh [build]      build it if missing or broken (idempotent)
#   scripts/torch-root.sh path         print where it is (exit 1 if not built)
#   scripts/torch-root.sh run CMD ...  run CMD inside it; the process keeps
#                                      its pid (exec all the way), so trainbpf
#                                      traces it from outside with -p PID
#   scripts/torch-root.sh remove       delete it
#
# Where: /var/lib/trainbpf-tests/trixie-torch (TRAINBPF_TORCH_ROOT overrides).
# Not under build/: `make clean` is routine and the root costs minutes and
# about 1.7 GB to make again; one root serves every checkout on the machine.
# The trixie suite is only in the root's own /etc/apt/sources.list, never in
# the machine's. `run` mounts /proc, /dev, /dev/shm, /tmp, /etc/hosts and the
# current directory inside a private mount namespace, from the one process
# that becomes CMD (scripts/torch-root-enter.py): they vanish with it and
# never show on the machine, nothing is left mounted in the root (so
# `remove` is a plain rm -rf of a tree that holds only its own files), and
# a tracer that launched `run` sees no mount(8) children.
set -euo pipefail

ROOT=${TRAINBPF_TORCH_ROOT:-/var/lib/trainbpf-tests/trixie-torch}
MIRROR=${TRAINBPF_TORCH_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# git and iproute2: the job variant that runs short subprocesses.
PKGS=python3-torch,git,iproute2
STAMP=.trainbpf-torch-root
LOG=$ROOT.log

# no $(...) on the way to `run`'s exec: a tracer that launched us would see
# every fork
if [[ $0 == */* ]]; then HERE=${0%/*}; else HERE=.; fi

die() { echo "torch-root: $*" >&2; exit 1; }

# Cheap: the stamp is written last, after torch imported in the new root.
works() {
	[[ -f $ROOT/$STAMP && -f $ROOT/usr/lib/python3/dist-packages/torch/__init__.py ]]
}

# Refuses to delete a tree with anything mounted under it (an interrupted
# mmdebstrap): rm -rf would walk into the machine's /proc or /dev.
safe_rm() {
	local d=$1
	[[ -e $d ]] || return 0
	if awk -v d="$(realpath "$d")" '$2 == d || index($2, d "/") == 1 { f = 1 } END { exit !f }' /proc/self/mounts; then
		die "something is mounted under $d: unmount it first (findmnt -R $d)"
	fi
	rm -rf --one-file-system -- "$d"
}

# Deletes ROOT only if this script made it (its stamp is there): whatever
# else sits at that path is not ours to delete.
remove_root() {
	[[ -e $ROOT ]] || return 0
	[[ -f $ROOT/$STAMP ]] || die "$ROOT exists and is not a root made by this script: not touching it"
	safe_rm "$ROOT"
}

build() {
	if works; then
		return 0
	fi
	[[ $(id -u) == 0 ]] || die "needs root"
	command -v mmdebstrap >/dev/null || die "mmdebstrap missing (apt-get install mmdebstrap)"
	local tmp=$ROOT.new t0 t1
	mkdir -p "$(dirname "$ROOT")"
	safe_rm "$tmp"
	remove_root
	t0=$(date +%s)
	# minbase: no init, no recommends; the suite and the mirror go to the
	# root's own sources.list. The machine's keyring knows trixie's keys.
	if ! mmdebstrap --variant=minbase --mode=root --components=main \
		--include="$PKGS" --aptopt='Acquire::Retries "3"' \
		"$SUITE" "$tmp" "$MIRROR" >"$LOG" 2>&1; then
		safe_rm "$tmp"
		die "mmdebstrap $SUITE failed, see $LOG"
	fi
	t1=$(date +%s)
	local v
	v=$( (enter "$tmp" /usr/bin/python3 -c 'import torch, sys
print("torch", torch.__version__, "python", sys.version.split()[0])') 2>>"$LOG") ||
		die "torch does not import in the new root, see $LOG"
	printf '%s\nbuilt in %d s, %s\n' "${v##*$'\n'}" $((t1 - t0)) \
		"$(du -sh --one-file-system "$tmp" | cut -f1)" >"$tmp/$STAMP"
	mv -T "$tmp" "$ROOT"
	echo "torch-root: $ROOT: $(paste -sd ' ' "$ROOT/$STAMP")"
}

# enter ROOT CMD...: CMD in ROOT, in the current directory, with the
# caller's pid (exec all the way, no child: scripts/torch-root-enter.py).
enter() {
	exec /usr/bin/python3 -I -S "$HERE/torch-root-enter.py" "$@"
}

run() {
	works || die "no root at $ROOT: run scripts/torch-root.sh first"
	(($#)) || die "run: no command"
	enter "$ROOT" "$@"
}

case ${1:-build} in
build) build ;;
path) works || exit 1; echo "$ROOT" ;;
run) shift; run "$@" ;;
remove) remove_root; safe_rm "$ROOT.new"; rm -f -- "$LOG" ;;
*) die "usage: $0 [build|path|run CMD...|remove]" ;;
esac
