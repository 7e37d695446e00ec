#!/bin/sh
# Started by mod_fcgid with a listening socket as fd 0 (the FastCGI convention), which
# `raco fastcgi serve` finds by itself. mod_fcgid sends each process one request at a time
# and starts more processes under load, so each one is a single process, no manager.
# FASTCGI_APP (set with FcgidInitialEnv) names the app; FASTCGI_SERVE_OPTIONS adds options.
exec raco fastcgi serve --single-process ${FASTCGI_SERVE_OPTIONS} \
     "${FASTCGI_APP:?set FASTCGI_APP with FcgidInitialEnv FASTCGI_APP /path/to/app.rkt}"
