#!/bin/bash
# tools/status-screenshot.sh : redraws fastcgi/scribblings/status-html.png, the status page
# shown in the manual, from the code in this checkout: a pool of two workers serving
# examples/hello.rkt on a unix socket under a temporary folder, 30 requests, then the page
# (?html) fetched through the socket and drawn by headless Chromium (Debian's `chromium`
# package; not installed by make test). Run it after a change to the status page.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 2; }
dir=$(mktemp -d /tmp/fcgi-shot-XXXXXX)
trap 'kill "$(cat "$dir/pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$dir"' EXIT
raco fastcgi serve --listen "unix:$dir/s.sock" --workers 2 --status-path /status \
  --pid-file "$dir/pid" examples/hello.rkt > "$dir/log" 2>&1 &
for i in $(seq 150); do [ -S "$dir/s.sock" ] && break; sleep 0.2; done
sleep 3                                  # both workers ready
for i in $(seq 30); do raco fastcgi request "unix:$dir/s.sock" /hello > /dev/null; done
sleep 1                                  # the workers' next report
raco fastcgi request "unix:$dir/s.sock" '/status?html' > "$dir/status.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,920 \
  --screenshot="$dir/status.png" "file://$dir/status.html" > /dev/null 2>&1
cp "$dir/status.png" fastcgi/scribblings/status-html.png
echo "wrote fastcgi/scribblings/status-html.png"
