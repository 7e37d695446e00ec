# Two set-up commands: `make run` (try the hello example) and `make test` (the whole suite).
# Both install what they need; `make install` links the package from this checkout.
SHELL  := /bin/bash
RACO   ?= raco
RACKET ?= racket
PORT   ?= 8080
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := nginx libsqlite3-0 libfcgi-bin php8.2-fpm curl apache2 libapache2-mod-fcgid gcc make lighttpd haproxy iproute2 systemd wrk golang-go faketime prometheus

.PHONY: run install racket-deps test-deps test docs clean fuzz

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
	$(RACO) make -v fastcgi/*.rkt fastcgi/private/*/*.rkt

test-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi

# `make test`: every test on this machine's Racket (Debian 12's 8.7), then the unit tests
# and the nginx integration tests on the newest Racket Debian ships (sid's), in a chroot
# that tools/racket-chroot.sh makes with debootstrap and keeps under
# /var/cache/fastcgi-chroots (tests/README.md says why not the whole suite twice).
# `make test-racket` runs the same chroot tests on bookworm-backports' and trixie's Racket.
TEST_SUITES ?= sid
MORE_SUITES ?= bookworm-backports trixie
.PHONY: test-racket
test: install test-deps docs
	$(RACO) make -v tests/*.rkt tests/integration/*.rkt tests/fuzz/*.rkt tests/reliability/*.rkt
	tools/run-suites.sh --host $(TEST_SUITES)

test-racket:
	tools/run-suites.sh $(TEST_SUITES) $(MORE_SUITES)

# The fuzzer (tests/fuzz/fuzz.rkt) for FUZZ_SECONDS (default 60), seed FUZZ_SEED (default:
# the time); the inputs of a failing batch are saved under tests/fuzz/crashes/, which
# make test replays.
FUZZ_SECONDS ?= 60
fuzz: install
	$(RACO) make -v tests/fuzz/fuzz.rkt
	$(RACKET) tests/fuzz/fuzz.rkt --seconds $(FUZZ_SECONDS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

# The side-by-side benchmark (bench/README.md): `make bench` runs every scenario (about 15
# minutes; run it on a quiet machine), `make bench-quick` the hello-world rows (under 2
# minutes); both write bench/RESULTS.md (the latest run), bench/RESULTS-commands.md and
# bench/results.png; `make bench`'s memory scenario (PSS per process) is bench/memory.rkt,
# which `racket bench/memory.rkt` runs alone (under a minute). `make bench-profile` writes
# bench/PROFILE.md (system calls per request, Racket's sampler). BENCH_DURATION,
# BENCH_WARMUP and BENCH_ONLY tune a run.
BENCH_APT_PACKAGES := nginx php8.2-fpm curl wrk haproxy golang-go gcc strace
BENCH_SOURCES := bench/run.rkt bench/profile.rkt bench/naive.rkt bench/web-server-hello.rkt \
  bench/hold-conns.rkt bench/apps/bench-raw.rkt bench/memory.rkt bench/apps/idle-base.rkt \
  examples/hello.rkt examples/hello-raw.rkt
.PHONY: bench bench-quick bench-profile bench-deps
bench-deps: install
	@missing=""; for p in $(BENCH_APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	$(RACO) make -v $(BENCH_SOURCES)
bench: bench-deps
	$(RACKET) bench/run.rkt
bench-quick: bench-deps
	$(RACKET) bench/run.rkt --quick
bench-profile: bench-deps
	$(RACKET) bench/profile.rkt

# Load, overload, faults and soak through a real nginx (tests/reliability/run.rkt):
# `make reliability` runs the fixed-rate, overload and fault scenarios, among them reloads,
# recycles and a stop under a load half of POSTs with bodies (about 7 minutes;
# RELIABILITY_SCALE multiplies their durations, RELIABILITY_ONLY picks some: the names are
# in `racket tests/reliability/run.rkt --help`), `make soak`
# runs the soak for SOAK_SECONDS (default an hour). Both print a table, write their part
# of tests/reliability/RESULTS.md, and exit 1 when a request was lost that the fault did
# not take.
RELIABILITY_APT_PACKAGES := nginx wrk golang-go
RELIABILITY_SCALE ?= 1
SOAK_SECONDS ?= 3600
.PHONY: reliability soak reliability-deps
reliability-deps: install
	@missing=""; for p in $(RELIABILITY_APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	$(RACO) make -v tests/reliability/run.rkt tests/reliability/app.rkt
reliability: reliability-deps
	$(RACKET) tests/reliability/run.rkt --scale $(RELIABILITY_SCALE) $(if $(RELIABILITY_ONLY),--only $(RELIABILITY_ONLY))
soak: reliability-deps
	$(RACKET) tests/reliability/run.rkt --soak $(SOAK_SECONDS)

# The CGI trampoline against libfcgi's cgi-fcgi and a Racket CGI script under Apache
# mod_cgi (about a minute); writes bench/trampoline-results.md.
.PHONY: bench-trampoline
bench-trampoline: install test-deps
	$(MAKE) -C trampoline
	$(RACO) make -v bench/trampoline-bench.rkt
	$(RACKET) bench/trampoline-bench.rkt

docs: install
	$(RACO) scribble --html --dest doc +m fastcgi/scribblings/fastcgi.scrbl

clean:
	rm -rf doc
	find . -name compiled -type d -prune -exec rm -rf {} +
