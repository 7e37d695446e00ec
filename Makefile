# Two set-up commands: `make run` (try the hello example) and `make test` (the whole suite).
# Both install what they need; `make install` links the package from this checkout.
SHELL  := /bin/bash
RACO   ?= raco
RACKET ?= racket
PORT   ?= 8080
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := nginx libfcgi-bin php8.2-fpm curl

.PHONY: run install racket-deps test-deps test docs clean

run: install
	$(RACO) fastcgi dev --port $(PORT) examples/hello.rkt

# The Racket collections we need; Debian's `racket` package carries them all (8.7).
racket-deps:
	@if $(RACKET) -l racket/base -l web-server/http -l racket/unix-socket -l rackunit \
	      -l scribble/manual -e '(void)' >/dev/null 2>&1; then :; else \
	  echo "installing Debian's racket package"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq racket; fi

# Idempotent: links ./fastcgi as the package `fastcgi` (so `raco fastcgi` works) and compiles it.
# A link to another checkout (an older clone) is replaced by a link to this one.
install: racket-deps
	@if $(RACO) pkg show -l fastcgi 2>/dev/null | grep -qF '(link "$(CURDIR)/fastcgi/")'; then :; else \
	  if $(RACO) pkg show -l fastcgi 2>/dev/null | grep -q '^ *fastcgi '; then $(RACO) pkg remove --force fastcgi; fi; \
	  $(RACO) pkg install --batch --deps fail --no-docs --link --name fastcgi "$(CURDIR)/fastcgi"; fi
	$(RACO) make -v fastcgi/private/raco.rkt fastcgi/main.rkt fastcgi/client.rkt

test-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi

test: install test-deps docs
	$(RACO) make -v tests/*.rkt tests/integration/*.rkt
	@set -o pipefail; $(RACO) test --timeout 600 tests 2>&1 | tee test-output.log; status=$$?; \
	passed=$$(grep -Eo '^[0-9]+ tests? passed' test-output.log | grep -Eo '^[0-9]+' || echo 0); \
	failed=$$(grep -Eo '^[0-9]+/[0-9]+ test failures' test-output.log | grep -Eo '^[0-9]+' || echo 0); \
	if [ "$$failed" != 0 ]; then total=$$(grep -Eo '^[0-9]+/[0-9]+ test failures' test-output.log | grep -Eo '/[0-9]+' | tr -d /); passed=$$((total - failed)); fi; \
	echo "$$passed passed, $$failed failed"; exit $$status

docs: install
	$(RACO) scribble --html --dest doc +m fastcgi/scribblings/fastcgi.scrbl

clean:
	rm -rf doc
	find . -name compiled -type d -prune -exec rm -rf {} +
