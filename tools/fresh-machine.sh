#!/bin/bash
# A newcomer's fresh Debian machine: debootstrap a minimal bookworm (cached), copy a clone of the
# project in, and run the README's two commands inside a chroot. .ci/run ends with it, so that
# a package installed by hand on the CI machine cannot hide a missing install step (a copy of
# the team's shared/tools/fresh-machine.sh).
# Usage: tools/fresh-machine.sh PROJECT_DIR [CMD1] [CMD2]   (default: "make run" "make check")
set -u
proj=$(cd "${1:-.}" && pwd); c1=${2:-make run}; c2=${3:-make check}
base=${FRESH_BASE:-/var/tmp/fresh-bookworm}
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null 2>&1 || { echo "cannot install debootstrap"; exit 1; }
if [ ! -x "$base/bin/bash" ]; then
  debootstrap --variant=minbase --include=ca-certificates,git,make,gcc,libc6-dev bookworm "$base" "${mirror:-}" >/tmp/debootstrap.log 2>&1 \
    || { echo "debootstrap failed: $(tail -n 3 /tmp/debootstrap.log)"; exit 1; }
fi
run=$(mktemp -d /var/tmp/fresh-run.XXXX)
# Removed only once nothing is mounted in it: rm -rf through a /dev still bound
# (a process left in the chroot holding it) would delete the host's devices.
cleanup() {
  umount "$run/proc" 2>/dev/null; umount "$run/dev" 2>/dev/null
  if mountpoint -q "$run/dev" || mountpoint -q "$run/proc"; then
    echo "fresh-machine: $run is still mounted; left in place"
  else
    rm -rf --one-file-system "$run"
  fi
}
trap cleanup EXIT
cp -a "$base/." "$run/" && git clone -q "$proj" "$run/root/project"
cp /etc/resolv.conf "$run/etc/resolv.conf" 2>/dev/null
mount -t proc proc "$run/proc"; mount --bind /dev "$run/dev"
for c in "$c1" "$c2"; do
  echo "== $c"
  chroot "$run" /bin/bash -lc "cd /root/project && DEBIAN_FRONTEND=noninteractive $c" >"$run/log" 2>&1; rc=$?
  tail -n 25 "$run/log"; echo "== exit $rc"
  [ $rc = 0 ] || exit 1
done
