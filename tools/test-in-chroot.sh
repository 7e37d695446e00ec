#!/usr/bin/env bash
# test-in-chroot.sh SUITE [TEST-FILE ...]: the suite (or the files named, relative to the
# checkout) on the Racket of Debian's SUITE (sid: the newest Debian ships; trixie;
# bookworm-backports), in the chroot tools/racket-chroot.sh makes and keeps. The checkout
# is copied in without its compiled files (another Racket's), the package is linked and
# compiled there, and raco test runs as `make test` runs it, ending with one line
# "N passed, N failed" and raco test's exit status. With no file named: every unit test
# (tests/*.rkt) and the nginx integration tests (tests/integration/*nginx*-test.rkt).
set -euo pipefail
suite="$1"; shift
here="$(cd "$(dirname "$0")/.." && pwd)"
# what those tests start: the fronts and peers, the C compiler, the tools they call
packages="nginx lighttpd curl gcc libc6-dev make faketime prometheus php-fpm libfcgi-bin libsqlite3-0 golang-go wrk
  systemd iproute2 procps util-linux bash psmisc"
dir=$("$here/tools/racket-chroot.sh" "$suite" $packages)
src="$dir/src/fastcgi-checkout"
rm -rf "$src"; mkdir -p "$src"
(cd "$here" && tar --exclude=compiled --exclude=.git --exclude=./doc --exclude=test-output.log -cf - .) | tar -xf - -C "$src"
if [ $# -eq 0 ]; then
  set -- $(cd "$src" && ls tests/*-test.rkt tests/integration/*nginx*-test.rkt)
fi
version=$(chroot "$dir" racket -e '(display (version))')
echo "== Racket $version ($suite chroot): $# test files"
log="$here/test-output-$suite.log"
set +e
chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  bash -c 'cd /src/fastcgi-checkout &&
    if ! raco pkg show -l fastcgi 2>/dev/null | grep -qF "(link \"/src/fastcgi-checkout/fastcgi/\")"; then
      raco pkg remove --force fastcgi >/dev/null 2>&1; 
      raco pkg install --batch --deps fail --no-docs --link --name fastcgi /src/fastcgi-checkout/fastcgi >/dev/null || exit 3; fi &&
    raco make fastcgi/*.rkt fastcgi/private/*/*.rkt tests/*.rkt tests/integration/*.rkt tests/lib/*.rkt &&
    raco test --timeout 600 "$@"' chroot-tests "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^[0-9]+ tests? passed' "$log" | grep -Eo '^[0-9]+' || echo 0)
failed=$(grep -Eo '^[0-9]+/[0-9]+ test failures' "$log" | grep -Eo '^[0-9]+' || echo 0)
if [ "$failed" != 0 ]; then
  total=$(grep -Eo '^[0-9]+/[0-9]+ test failures' "$log" | grep -Eo '/[0-9]+' | tr -d /)
  passed=$((total - failed))
  echo "==== what failed on Racket $version (tools/failures.awk) ===="; awk -f "$here/tools/failures.awk" "$log"
fi
echo "Racket $version: $passed passed, $failed failed"
exit $status
