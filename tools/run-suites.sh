#!/usr/bin/env bash
# run-suites.sh [--host] [SUITE ...]: the test suite on this machine's Racket (--host: every
# test file, as raco test tests runs them) and on the Racket of each Debian SUITE named, in
# its chroot (tools/test-in-chroot.sh: the unit tests and the nginx integration tests).
# Each run ends with "Racket V: N passed, N failed"; the last line adds them up,
# "N passed, N failed", and the exit status is non-zero when any run failed.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
total_passed=0; total_failed=0; status=0
# count LOG : sets passed and failed from raco test's lines in LOG
count() {
  passed=$(grep -Eo '^[0-9]+ tests? passed' "$1" | grep -Eo '^[0-9]+' | awk '{s+=$1} END {print s+0}')
  failed=$(grep -Eo '^[0-9]+/[0-9]+ test failures' "$1" | grep -Eo '^[0-9]+' | awk '{s+=$1} END {print s+0}')
  local total
  total=$(grep -Eo '^[0-9]+/[0-9]+ test failures' "$1" | grep -Eo '/[0-9]+' | tr -d / | awk '{s+=$1} END {print s+0}')
  if [ "$failed" != 0 ]; then passed=$((passed + total - failed)); fi
}
if [ "${1:-}" = --host ]; then
  shift
  version=$(racket -e '(display (version))')
  echo "== Racket $version (this machine): every test file"
  raco test --timeout 600 tests 2>&1 | tee test-output.log
  s=${PIPESTATUS[0]}
  count test-output.log
  if [ "$s" != 0 ]; then
    [ "$failed" = 0 ] && failed=1
    echo "==== what failed on Racket $version (tools/failures.awk) ===="; awk -f tools/failures.awk test-output.log
    status=1
  fi
  echo "Racket $version: $passed passed, $failed failed"
  total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))
fi
for suite in "$@"; do
  tools/test-in-chroot.sh "$suite" 2>&1 | tee "test-output-$suite.full"
  s=${PIPESTATUS[0]}
  count "test-output-$suite.full"
  if [ "$s" != 0 ]; then [ "$failed" = 0 ] && failed=1; status=1; fi
  rm -f "test-output-$suite.full"
  total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))
done
echo "$total_passed passed, $total_failed failed"
exit $status
