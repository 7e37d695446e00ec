#!/usr/bin/env bash
# racket-chroot.sh SUITE [PACKAGES...]: a Debian chroot with that suite's Racket, made
# with debootstrap from the archive this machine's apt uses, kept under
# $FASTCGI_CHROOTS (default /var/cache/fastcgi-chroots) for the next run, and its
# mounts (proc, sys, dev, dev/pts, a tmpfs on tmp) set up. Prints the chroot's folder.
# SUITE: sid (the newest Racket Debian ships), trixie, bookworm-backports.
# PACKAGES: more Debian packages to install in it (the tests' fronts, say).
set -euo pipefail
suite="$1"; shift
root_dir="${FASTCGI_CHROOTS:-/var/cache/fastcgi-chroots}"
dir="$root_dir/$suite"
log() { echo "racket-chroot($suite): $*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (debootstrap, chroot, mount)"; exit 2; }

mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb / && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { log "no Debian mirror found in /etc/apt"; exit 2; }

case "$suite" in
  sid|trixie) base="$suite"; target="" ;;
  bookworm-backports) base=bookworm; target="-t bookworm-backports" ;;
  *) log "unknown suite (sid, trixie, bookworm-backports)"; exit 2 ;;
esac

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

# unmount_all DIR : what mount_all mounted under DIR, before anything removes DIR
unmount_all() {
  for m in tmp dev/pts dev sys proc; do
    if mountpoint -q "$1/$m"; then umount "$1/$m" || umount -l "$1/$m"; fi
  done
  if mountpoint -q "$1"; then umount "$1" || umount -l "$1"; fi
}

# mount_all : the chroot's folder bound onto itself first (its / must be a mount point,
# or `unshare --mount-proc` inside cannot make its mounts private: container-test), then
# proc, sys, dev, dev/pts and a tmpfs on tmp
mount_all() {
  if ! mountpoint -q "$dir"; then
    unmount_all "$dir"
    mount --bind "$dir" "$dir"
  fi
  for m in proc sys dev dev/pts tmp; do
    mountpoint -q "$dir/$m" && continue
    mkdir -p "$dir/$m"
    case $m in
      proc) mount -t proc proc "$dir/proc" ;;
      sys) mount -t sysfs sys "$dir/sys" ;;
      dev) mount --bind /dev "$dir/dev" ;;
      dev/pts) mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts" ;;
      tmp) mount -t tmpfs -o mode=1777 tmpfs "$dir/tmp" ;;
    esac
  done
}

if [ ! -e "$dir/.fastcgi-ready" ]; then
  mkdir -p "$root_dir"
  # an earlier attempt that did not finish: removed, never through a mount (dev is /dev)
  for d in "$dir" "$dir.partial"; do
    [ -e "$d" ] || continue
    unmount_all "$d"
    if awk '{print $2}' /proc/mounts | grep -q "^$d/"; then log "mounts remain under $d: not removing it"; exit 1; fi
    rm -rf "$d"
  done
  log "debootstrap $base from $mirror (a few minutes)"
  debootstrap --variant=minbase "$base" "$dir.partial" "$mirror" >"$root_dir/$suite.debootstrap.log" 2>&1 \
    || { log "debootstrap failed; see $root_dir/$suite.debootstrap.log"; tail -5 "$root_dir/$suite.debootstrap.log" >&2; exit 1; }
  {
    echo 'Acquire::Check-Valid-Until "false";'
    echo 'APT::Install-Recommends "false";'
  } >"$dir.partial/etc/apt/apt.conf.d/99fastcgi"
  if [ "$suite" = bookworm-backports ]; then
    echo "deb $mirror bookworm-backports main" >"$dir.partial/etc/apt/sources.list.d/backports.list"
  fi
  cp /etc/resolv.conf "$dir.partial/etc/resolv.conf" 2>/dev/null || true
  mv "$dir.partial" "$dir"
  mount_all
  chroot "$dir" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -qq $target racket >/dev/null
  touch "$dir/.fastcgi-ready"
fi
mount_all
if [ $# -gt 0 ]; then
  missing=""
  for p in "$@"; do chroot "$dir" dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    log "installing:$missing"
    chroot "$dir" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -qq $missing >/dev/null
  fi
fi
echo "$dir"
