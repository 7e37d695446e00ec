#!/bin/bash
# direct.sh SECONDS ROUNDS NAME=TREE ... : CPU per request of our raw hello server, with no
# front: bench/direct/load.c (8 keep-conn connections, closed loop) on a unix socket. TREE
# holds a compiled fastcgi/ collection (e.g. git archive REV fastcgi | tar -x -C TREE &&
# raco make TREE/fastcgi/main.rkt). Each round runs every tree in turn: 1 s warm-up, then
# SECONDS measured, the server's user and system CPU read from /proc/PID/stat.
# CONNS (default 8): connections; RECONNECT=K: each connection is replaced by a new one
# after K requests (default 0: never), to measure what a new connection costs.
# Loopback only: everything lives in a temporary directory.
set -e
secs=$1; rounds=$2; shift 2
dir=$(mktemp -d /tmp/fcgi-direct-XXXXXX)
trap 'rm -rf "$dir"' EXIT
gcc -O2 -o "$dir/load" "$(dirname "$0")/load.c"
for r in $(seq "$rounds"); do
  for v in "$@"; do
    name=${v%%=*}; tree=${v#*=}
    sock=$dir/$name.sock
    cat > "$dir/srv-$name.rkt" <<EOS
#lang racket/base
(require (file "$tree/fastcgi/main.rkt"))
(define answer #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n")
(void (serve/fastcgi-raw (λ (req) (write-bytes answer (fastcgi-request-stdout req))) #:listen "unix:$sock"))
(sync never-evt)
EOS
    rm -f "$sock"
    racket "$dir/srv-$name.rkt" 2>/dev/null & pid=$!
    for i in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    "$dir/load" "$sock" "${CONNS:-8}" 1 "${RECONNECT:-0}" > /dev/null
    read -r -a s0 < /proc/$pid/stat
    out=$("$dir/load" "$sock" "${CONNS:-8}" "$secs" "${RECONNECT:-0}")
    read -r -a s1 < /proc/$pid/stat
    reqs=${out%% *}
    u=$(( (${s1[13]} - ${s0[13]}) * 10000 )); s=$(( (${s1[14]} - ${s0[14]}) * 10000 ))
    printf "%-8s %s  user %.2f us/req  sys %.2f us/req\n" "$name" "$out" \
      "$(echo "$u / $reqs" | bc -l)" "$(echo "$s / $reqs" | bc -l)"
    kill $pid; wait $pid 2>/dev/null || true
  done
done
