// Command loadgen is an open-loop, fixed-rate HTTP/1.1 load generator for the
// reliability tests (make reliability). It is built and driven by
// tests/reliability/loadgen.rkt; it uses the Go standard library only (Go 1.19).
//
// Build (what loadgen.rkt does):
//
//	cd tests/reliability/loadgen && GOFLAGS=-mod=mod GOPROXY=off go build -o DIR/loadgen .
//
// Usage:
//
//	loadgen -url http://127.0.0.1:8080/hello -rate 1000 -duration 5 [flags]
//
// Flags:
//
//	-url URL           target (required), http:// or https://
//	-mix "P=W,P=W"     pick each request's path by weight instead of the -url's path; paths are
//	                   relative to the -url's scheme://host:port and start with "/" (a path may
//	                   hold "=" but not ","); the choice is deterministic given -seed
//	-rate R            requests per second (float, > 0; required)
//	-duration S        seconds to send for (float, > 0; required)
//	-max-inflight N    requests in flight at once (default 4000); a request whose due time
//	                   comes while N are in flight is not sent and is counted in gen_dropped
//	-timeout S         per-request timeout in seconds, connect to end of body (default 10)
//	-method M          GET (default) or POST
//	-body-bytes N      POST body of N bytes, a repeating pattern (default 0)
//	-expect-bytes N    a 200 whose body is not N bytes long counts as error short_body (not
//	                   applied to the -post-share POSTs)
//	-post-share F      send this share of the requests (0 to 1; default 0) as POSTs with a
//	                   body, the others as -method says; which ones is deterministic given -seed
//	-post-path P       the path of those POSTs, relative to the -url's scheme://host:port
//	                   (default: the -url's path)
//	-post-bytes N|A-B  their body: N bytes, or from A to B bytes picked per request (default 1024)
//	-post-echo         a 200 to one of those POSTs must have as body the decimal length of
//	                   its request body (what /upload of the reliability app answers), else it
//	                   counts as error short_body
//	-seed N            seed for -mix and -post-share (default 1)
//	-out FILE          write the JSON result to FILE (default: standard output)
//
// Behaviour:
//
// Open loop: request i (i = 0, 1, ...) is due at t0 + i/rate, for every i with i/rate <
// duration. One scheduling goroutine sleeps until each due time (a timerfd read through
// the Go poller, so Linux only; the Go timer rounds short sleeps up to a millisecond)
// and starts one goroutine per request. Latency runs from the DUE time, not the actual send
// time, to the end of the body, so lateness of the generator (or of a full -max-inflight) is
// included: no coordinated omission. The generator never waits for a free slot: a request
// that would exceed -max-inflight is dropped and counted, so it never becomes closed-loop.
//
// Connections are HTTP/1.1 keep-alive (net/http, no proxy, no compression, redirects not
// followed); the whole body is read and discarded. After the last request is sent the
// program waits for the ones in flight (each is bounded by -timeout), then writes the result.
// SIGINT or SIGTERM stops sending early; the in-flight requests are awaited and the result is
// written as usual (exit status 0). A second SIGINT/SIGTERM cancels the in-flight requests
// (they count as error "other").
//
// Every request sent ends as exactly one of: an HTTP status (counted in by_status), or an
// error (counted in errors), so sent = sum(by_status) + sum(errors). Error classes:
//
//	connect     the connection could not be made (refused, or any other dial failure)
//	timeout     -timeout passed, in any phase (dial, waiting for headers, reading the body)
//	reset       connection reset, EOF or broken pipe before the whole response
//	short_body  status 200 but the body length differs from -expect-bytes (or, with -post-echo,
//	            a POST's answer is not its body's length)
//	other       anything else
//
// Output (JSON; latencies in milliseconds, microsecond resolution):
//
//	{"rate": R, "duration": S, "sent": n, "gen_dropped": n, "achieved_rate": sent/elapsed,
//	 "by_status": {"200": n, ...},
//	 "errors": {"connect": n, "timeout": n, "reset": n, "short_body": n, "other": n},
//	 "latency": {"all": L, "by_status": {"200": L, ...}},
//	 "by_method": {"GET": M, "POST": M},
//	 "seconds": [{"t": 0, "sent": n, "s200": n, "s503": n, "other_status": n, "errors": n,
//	              "p50": ms, "p99": ms, "max": ms}, ...]}
//
// where L = {"n", "p50", "p90", "p99", "p999", "max", "mean"} and M = {"sent": n, "by_status":
// {...}, "errors": {...}, "latency": L}, the same counts for the requests of one method: an
// entry for -method, and one for POST with -post-share > 0. Percentiles are nearest-rank
// over the sorted latencies. Latencies are those of requests that got an HTTP response (any
// status); failed requests are only counted. A percentile over no latencies is null.
// elapsed is the sending phase: -duration for a complete run, the time to the stop for an
// early stop. seconds has one bucket per second of DUE time (t = 0, 1, ...), up to the last
// request that was due before the end or the stop; a bucket's sent leaves out the requests
// dropped for -max-inflight, its errors are the failed ones and its p50/p99/max are over the
// responses due in that second.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// error classes; 0 means no error
const (
	errNone = iota
	errConnect
	errTimeout
	errReset
	errShortBody
	errOther
	nErrClasses
)

var errNames = [nErrClasses]string{"", "connect", "timeout", "reset", "short_body", "other"}

// request states, set by the scheduler
const (
	notDue = iota
	stateSent
	stateDropped
)

// maxRequests bounds the preallocated outcome table (16 bytes a request).
const maxRequests = 10_000_000

// outcome is one request's fate. The scheduler writes state before starting the request's
// goroutine; that goroutine writes the rest; all are read after the WaitGroup is done.
type outcome struct {
	lat    time.Duration // due time to end of body (or to the failure)
	status int32         // HTTP status of a response, 0 if the request failed
	errc   uint8
	state  uint8
	post   bool // one of the -post-share POSTs (set by the scheduler)
}

type config struct {
	target      string   // the -url as given, used when there is no -mix
	mixURLs     []string // with -mix: full URLs
	mixCum      []float64
	rate        float64
	duration    float64
	maxInflight int
	timeout     time.Duration
	method      string
	payload     []byte // POST body, nil for none
	expect      int64  // -1: no check
	postShare   float64
	postURL     string
	postMin     int
	postMax     int
	postBody    []byte // postMax bytes; a POST of the share sends a prefix
	postEcho    bool
	seed        int64
	out         string
}

func main() {
	// Catch the signals first, so an early stop is never the default (fatal) action.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	raiseFileLimit(cfg.maxInflight)

	var stop atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-sigs
		stop.Store(true)
		<-sigs
		cancel()
	}()

	res := run(ctx, cfg, &stop)
	data, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: encoding the result:", err)
		os.Exit(1)
	}
	data = append(data, '\n')
	if cfg.out == "" {
		_, err = os.Stdout.Write(data)
	} else {
		err = os.WriteFile(cfg.out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: writing the result:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	target := fs.String("url", "", "target URL (required)")
	mix := fs.String("mix", "", `"PATH=W,PATH=W": pick the path per request by weight`)
	rate := fs.Float64("rate", 0, "requests per second (> 0)")
	duration := fs.Float64("duration", 0, "seconds to send for (> 0)")
	maxInflight := fs.Int("max-inflight", 4000, "requests in flight at once")
	timeout := fs.Float64("timeout", 10, "per-request timeout, seconds")
	method := fs.String("method", "GET", "GET or POST")
	bodyBytes := fs.Int("body-bytes", 0, "POST body size in bytes")
	expect := fs.Int64("expect-bytes", -1, "expected body length of a 200 (-1: no check)")
	seed := fs.Int64("seed", 1, "seed for -mix and -post-share")
	postShare := fs.Float64("post-share", 0, "share of the requests sent as POSTs with a body (0 to 1)")
	postPath := fs.String("post-path", "", "path of those POSTs (default: the -url's path)")
	postBytes := fs.String("post-bytes", "1024", "their body size: N, or A-B picked per request")
	postEcho := fs.Bool("post-echo", false, "a 200 to those POSTs must answer their body's length")
	out := fs.String("out", "", "result file (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	cfg := &config{rate: *rate, duration: *duration, maxInflight: *maxInflight,
		method: strings.ToUpper(*method), expect: *expect, seed: *seed, out: *out}
	if *target == "" {
		return nil, errors.New("-url is required")
	}
	u, err := url.Parse(*target)
	if err != nil {
		return nil, fmt.Errorf("-url: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-url must be http://host[:port]/path or https://..., not %q", *target)
	}
	cfg.target = u.String()
	if *mix != "" {
		base := u.Scheme + "://" + u.Host
		total := 0.0
		for _, entry := range strings.Split(*mix, ",") {
			entry = strings.TrimSpace(entry)
			eq := strings.LastIndex(entry, "=")
			if eq <= 0 {
				return nil, fmt.Errorf("-mix entry %q is not PATH=WEIGHT", entry)
			}
			path := entry[:eq]
			w, err := strconv.ParseFloat(entry[eq+1:], 64)
			if err != nil || w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
				return nil, fmt.Errorf("-mix entry %q: the weight must be a number >= 0", entry)
			}
			if !strings.HasPrefix(path, "/") {
				return nil, fmt.Errorf("-mix entry %q: the path must start with /", entry)
			}
			if _, err := url.Parse(base + path); err != nil {
				return nil, fmt.Errorf("-mix entry %q: %v", entry, err)
			}
			total += w
			cfg.mixURLs = append(cfg.mixURLs, base+path)
			cfg.mixCum = append(cfg.mixCum, total)
		}
		if total <= 0 {
			return nil, errors.New("-mix: the weights add up to 0")
		}
	}
	if !(cfg.rate > 0) || math.IsInf(cfg.rate, 0) {
		return nil, errors.New("-rate must be > 0")
	}
	if !(cfg.duration > 0) || math.IsInf(cfg.duration, 0) {
		return nil, errors.New("-duration must be > 0")
	}
	if cfg.maxInflight < 1 {
		return nil, errors.New("-max-inflight must be >= 1")
	}
	if !(*timeout > 0) || *timeout > 1e6 {
		return nil, errors.New("-timeout must be > 0 seconds")
	}
	cfg.timeout = time.Duration(*timeout * float64(time.Second))
	switch cfg.method {
	case "GET":
		if *bodyBytes != 0 {
			return nil, errors.New("-body-bytes needs -method POST")
		}
	case "POST":
		if *bodyBytes < 0 {
			return nil, errors.New("-body-bytes must be >= 0")
		}
		cfg.payload = make([]byte, *bodyBytes)
		const pattern = "0123456789abcdefghijklmnopqrstuvwxyz\n"
		for i := range cfg.payload {
			cfg.payload[i] = pattern[i%len(pattern)]
		}
	default:
		return nil, fmt.Errorf("-method must be GET or POST, not %q", *method)
	}
	if err := parsePostFlags(cfg, u, *postShare, *postPath, *postBytes, *postEcho); err != nil {
		return nil, err
	}
	if n := requestCount(cfg.rate, cfg.duration); n > maxRequests {
		return nil, fmt.Errorf("-rate x -duration = %d requests, more than %d", n, maxRequests)
	}
	return cfg, nil
}

// parsePostFlags : the -post-* flags into cfg
func parsePostFlags(cfg *config, u *url.URL, share float64, path, size string, echo bool) error {
	if !(share >= 0 && share <= 1) {
		return errors.New("-post-share must be from 0 to 1")
	}
	if share == 0 {
		return nil
	}
	if cfg.method != "GET" {
		return errors.New("-post-share needs -method GET (the others are GETs)")
	}
	cfg.postShare, cfg.postEcho = share, echo
	if path == "" {
		cfg.postURL = u.String()
	} else {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("-post-path %q must start with /", path)
		}
		p, err := url.Parse(u.Scheme + "://" + u.Host + path)
		if err != nil {
			return fmt.Errorf("-post-path: %v", err)
		}
		cfg.postURL = p.String()
	}
	lo, hi, found := strings.Cut(size, "-")
	if !found {
		hi = lo
	}
	a, errA := strconv.Atoi(lo)
	b, errB := strconv.Atoi(hi)
	if errA != nil || errB != nil || a < 0 || b < a || b > 64<<20 {
		return fmt.Errorf("-post-bytes must be N or A-B with 0 <= A <= B <= 64 MiB, not %q", size)
	}
	cfg.postMin, cfg.postMax = a, b
	cfg.postBody = make([]byte, b)
	const pattern = "abcdefghijklmnopqrstuvwxyz0123456789\n"
	for i := range cfg.postBody {
		cfg.postBody[i] = pattern[i%len(pattern)]
	}
	return nil
}

// requestCount : the number of i >= 0 with i/rate < duration (a little slack for rounding,
// so that 0.1 x 30 is 3 requests, not 4)
func requestCount(rate, duration float64) int {
	x := rate * duration
	if x > 2*maxRequests {
		return 2 * maxRequests
	}
	n := int(math.Ceil(x - 1e-9))
	if n < 1 {
		n = 1
	}
	return n
}

// dueOffset : request i's due time, from t0
func dueOffset(i int, rate float64) time.Duration {
	return time.Duration(float64(i) / rate * float64(time.Second))
}

// raiseFileLimit : the soft limit on open files up to the hard limit (Go 1.19 does this
// itself; this is for clarity), with a warning if -max-inflight cannot fit
func raiseFileLimit(maxInflight int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if uint64(maxInflight)+64 > lim.Cur {
		fmt.Fprintf(os.Stderr, "loadgen: warning: -max-inflight %d is near the open-file limit %d; "+
			"failed dials will count as connect errors\n", maxInflight, lim.Cur)
	}
}

type generator struct {
	cfg    *config
	ctx    context.Context
	client *http.Client
	sem    chan struct{}
	wg     sync.WaitGroup
	out    []outcome
}

func run(ctx context.Context, cfg *config, stop *atomic.Bool) *result {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: cfg.timeout}).DialContext,
		MaxIdleConns:          cfg.maxInflight,
		MaxIdleConnsPerHost:   cfg.maxInflight,
		MaxConnsPerHost:       cfg.maxInflight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.timeout,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		ExpectContinueTimeout: 0,
	}
	defer tr.CloseIdleConnections()
	g := &generator{
		cfg: cfg,
		ctx: ctx,
		client: &http.Client{
			Transport: tr,
			Timeout:   cfg.timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		sem: make(chan struct{}, cfg.maxInflight),
		out: make([]outcome, requestCount(cfg.rate, cfg.duration)),
	}

	type schedDone struct {
		scheduled int
		elapsed   time.Duration
	}
	done := make(chan schedDone)
	go func() {
		n, elapsed := g.schedule(stop)
		done <- schedDone{n, elapsed}
	}()
	sd := <-done
	g.wg.Wait()
	return g.summarize(sd.scheduled, sd.elapsed)
}

// schedule sends the requests at their due times; -> how many came due, and the length
// of the sending phase
func (g *generator) schedule(stop *atomic.Bool) (int, time.Duration) {
	cfg := g.cfg
	var rng *rand.Rand
	if cfg.mixURLs != nil {
		rng = rand.New(rand.NewSource(cfg.seed))
	}
	var postRng *rand.Rand // a sequence of its own, so that -mix picks the same paths with it
	if cfg.postShare > 0 {
		postRng = rand.New(rand.NewSource(cfg.seed + 7919))
	}
	clock, err := newTimer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: timerfd:", err)
		os.Exit(1)
	}
	defer clock.close()
	t0 := time.Now()
	for i := range g.out {
		due := t0.Add(dueOffset(i, cfg.rate))
		if !clock.sleepUntil(due, stop) {
			return i, time.Since(t0)
		}
		target := cfg.target
		if rng != nil { // chosen for every request, sent or dropped, so the sequence is fixed
			r := rng.Float64() * cfg.mixCum[len(cfg.mixCum)-1]
			k := sort.Search(len(cfg.mixCum), func(j int) bool { return cfg.mixCum[j] > r })
			if k == len(cfg.mixCum) {
				k--
			}
			target = cfg.mixURLs[k]
		}
		size := -1 // the body of a -post-share POST; -1: a -method request
		if postRng != nil {
			post := postRng.Float64() < cfg.postShare
			n := cfg.postMin + postRng.Intn(cfg.postMax-cfg.postMin+1)
			if post {
				target, size = cfg.postURL, n
			}
		}
		select {
		case g.sem <- struct{}{}:
			g.out[i].state = stateSent
			g.out[i].post = size >= 0
			g.wg.Add(1)
			go g.fire(i, due, target, size)
		default:
			g.out[i].state = stateDropped
		}
	}
	elapsed := time.Since(t0)
	if full := time.Duration(cfg.duration * float64(time.Second)); elapsed < full {
		elapsed = full
	}
	return len(g.out), elapsed
}

// timer sleeps on a timerfd (Linux) read through the Go poller: the wake-up is as exact
// as nanosleep, yet it is an ordinary network-style event, so one thread blocked in epoll
// serves both the schedule and the responses. (time.Sleep rounds short sleeps up to a
// millisecond in Go 1.19; nanosleep needs a thread of its own and a hand-off per request.)
type timer struct {
	fd     uintptr  // the raw descriptor (os.File.Fd would make it blocking)
	f      *os.File // the same descriptor, non-blocking, registered with the poller
	t0     time.Time
	t0mono int64 // CLOCK_MONOTONIC at t0, in ns
	buf    [8]byte
}

type itimerspec struct{ interval, value syscall.Timespec }

const (
	clockMonotonic  = 1
	tfdTimerAbstime = 1
)

func newTimer() (*timer, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic,
		syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil, e
	}
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic,
		uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		syscall.Close(int(fd))
		return nil, e
	}
	return &timer{fd: fd, f: os.NewFile(fd, "timerfd"), t0: time.Now(), t0mono: ts.Nano()}, nil
}

func (t *timer) close() { t.f.Close() }

// sleepUntil : sleeps until due, in slices of at most 20 ms so that a stop is seen soon;
// false if a stop came first
func (t *timer) sleepUntil(due time.Time, stop *atomic.Bool) bool {
	for {
		if stop.Load() {
			return false
		}
		now := time.Now()
		d := due.Sub(now)
		if d <= 0 {
			return true
		}
		if d > 20*time.Millisecond {
			d = 20 * time.Millisecond
		}
		spec := itimerspec{value: syscall.NsecToTimespec(t.t0mono + int64(now.Add(d).Sub(t.t0)))}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, t.fd, tfdTimerAbstime,
			uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
			time.Sleep(d) // not expected; coarser, but still a sleep
			continue
		}
		_, _ = t.f.Read(t.buf[:]) // the expiry count; the loop checks the clock itself
	}
}

// fire makes request i, due at due, and records its outcome; size >= 0: a -post-share
// POST with a body of size bytes
func (g *generator) fire(i int, due time.Time, target string, size int) {
	defer func() {
		<-g.sem
		g.wg.Done()
	}()
	o := &g.out[i]
	method := g.cfg.method
	var body io.Reader
	switch {
	case size >= 0:
		method, body = "POST", bytes.NewReader(g.cfg.postBody[:size])
	case g.cfg.payload != nil:
		body = bytes.NewReader(g.cfg.payload)
	}
	req, err := http.NewRequestWithContext(g.ctx, method, target, body)
	if err != nil {
		o.lat, o.errc = time.Since(due), errOther
		return
	}
	req.Header.Set("User-Agent", "fastcgi-reliability-loadgen")
	resp, err := g.client.Do(req)
	if err != nil {
		o.lat, o.errc = time.Since(due), classify(err)
		return
	}
	echo := size >= 0 && g.cfg.postEcho && resp.StatusCode == http.StatusOK
	var answer bytes.Buffer
	var n int64
	if echo { // a short answer, kept to compare
		n, err = io.Copy(&answer, io.LimitReader(resp.Body, 64))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
		}
	} else {
		n, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	o.lat = time.Since(due)
	switch {
	case err != nil:
		o.errc = classify(err)
	case echo && strings.TrimSpace(answer.String()) != strconv.Itoa(size):
		o.errc = errShortBody
	case !echo && size < 0 && g.cfg.expect >= 0 && resp.StatusCode == http.StatusOK && n != g.cfg.expect:
		o.errc = errShortBody
	default:
		o.status = int32(resp.StatusCode)
	}
}

// classify : the error class of a failed request
func classify(err error) uint8 {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return errTimeout
	}
	if errors.Is(err, context.Canceled) {
		return errOther
	}
	var op *net.OpError
	if (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) {
		return errConnect
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return errReset
	}
	msg := err.Error()
	for _, s := range []string{"connection reset", "broken pipe", "EOF",
		"server closed", "transport connection broken"} {
		if strings.Contains(msg, s) {
			return errReset
		}
	}
	return errOther
}

// ---------------------------------------------------------------------------------------
// The result

type latency struct {
	N    int      `json:"n"`
	P50  *float64 `json:"p50"`
	P90  *float64 `json:"p90"`
	P99  *float64 `json:"p99"`
	P999 *float64 `json:"p999"`
	Max  *float64 `json:"max"`
	Mean *float64 `json:"mean"`
}

type second struct {
	T           int      `json:"t"`
	Sent        int      `json:"sent"`
	S200        int      `json:"s200"`
	S503        int      `json:"s503"`
	OtherStatus int      `json:"other_status"`
	Errors      int      `json:"errors"`
	P50         *float64 `json:"p50"`
	P99         *float64 `json:"p99"`
	Max         *float64 `json:"max"`
}

type result struct {
	Rate         float64        `json:"rate"`
	Duration     float64        `json:"duration"`
	Sent         int            `json:"sent"`
	GenDropped   int            `json:"gen_dropped"`
	AchievedRate float64        `json:"achieved_rate"`
	ByStatus     map[string]int `json:"by_status"`
	Errors       map[string]int `json:"errors"`
	Latency      struct {
		All      latency            `json:"all"`
		ByStatus map[string]latency `json:"by_status"`
	} `json:"latency"`
	ByMethod map[string]*methodCounts `json:"by_method"`
	Seconds  []second                 `json:"seconds"`
}

// methodCounts : the counts of the requests of one method
type methodCounts struct {
	Sent     int            `json:"sent"`
	ByStatus map[string]int `json:"by_status"`
	Errors   map[string]int `json:"errors"`
	Latency  latency        `json:"latency"`
	lats     []time.Duration
}

func newMethodCounts() *methodCounts {
	m := &methodCounts{ByStatus: map[string]int{}, Errors: map[string]int{}}
	for c := 1; c < nErrClasses; c++ {
		m.Errors[errNames[c]] = 0
	}
	return m
}

// add counts one sent request's outcome
func (m *methodCounts) add(o *outcome) {
	m.Sent++
	if o.errc != errNone {
		m.Errors[errNames[o.errc]]++
		return
	}
	m.ByStatus[strconv.Itoa(int(o.status))]++
	m.lats = append(m.lats, o.lat)
}

func (g *generator) summarize(scheduled int, elapsed time.Duration) *result {
	res := &result{Rate: g.cfg.rate, Duration: g.cfg.duration,
		ByStatus: map[string]int{}, Errors: map[string]int{}, Seconds: []second{},
		ByMethod: map[string]*methodCounts{g.cfg.method: newMethodCounts()}}
	if g.cfg.postShare > 0 {
		res.ByMethod["POST"] = newMethodCounts()
	}
	for c := 1; c < nErrClasses; c++ {
		res.Errors[errNames[c]] = 0
	}
	var all []time.Duration
	byStatus := map[int32][]time.Duration{}
	var perSecond [][]time.Duration
	for i := 0; i < scheduled; i++ {
		o := &g.out[i]
		t := int(dueOffset(i, g.cfg.rate) / time.Second)
		for len(res.Seconds) <= t {
			res.Seconds = append(res.Seconds, second{T: len(res.Seconds)})
			perSecond = append(perSecond, nil)
		}
		s := &res.Seconds[t]
		if o.state != stateSent {
			res.GenDropped++
			continue
		}
		res.Sent++
		s.Sent++
		if o.post {
			res.ByMethod["POST"].add(o)
		} else {
			res.ByMethod[g.cfg.method].add(o)
		}
		if o.errc != errNone {
			res.Errors[errNames[o.errc]]++
			s.Errors++
			continue
		}
		res.ByStatus[strconv.Itoa(int(o.status))]++
		switch o.status {
		case 200:
			s.S200++
		case 503:
			s.S503++
		default:
			s.OtherStatus++
		}
		all = append(all, o.lat)
		byStatus[o.status] = append(byStatus[o.status], o.lat)
		perSecond[t] = append(perSecond[t], o.lat)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		res.AchievedRate = float64(res.Sent) / secs
	}
	res.Latency.All = summarizeLatency(all)
	res.Latency.ByStatus = map[string]latency{}
	for st, lats := range byStatus {
		res.Latency.ByStatus[strconv.Itoa(int(st))] = summarizeLatency(lats)
	}
	for _, m := range res.ByMethod {
		m.Latency = summarizeLatency(m.lats)
	}
	for t, lats := range perSecond {
		l := summarizeLatency(lats)
		res.Seconds[t].P50, res.Seconds[t].P99, res.Seconds[t].Max = l.P50, l.P99, l.Max
	}
	return res
}

// summarizeLatency sorts lats (in place) and takes nearest-rank percentiles
func summarizeLatency(lats []time.Duration) latency {
	l := latency{N: len(lats)}
	if len(lats) == 0 {
		return l
	}
	sort.Slice(lats, func(a, b int) bool { return lats[a] < lats[b] })
	rank := func(p float64) *float64 {
		k := int(math.Ceil(p * float64(len(lats))))
		if k < 1 {
			k = 1
		}
		if k > len(lats) {
			k = len(lats)
		}
		return ms(lats[k-1])
	}
	var sum time.Duration
	for _, d := range lats {
		sum += d
	}
	l.P50, l.P90, l.P99, l.P999 = rank(0.50), rank(0.90), rank(0.99), rank(0.999)
	l.Max = ms(lats[len(lats)-1])
	l.Mean = ms(sum / time.Duration(len(lats)))
	return l
}

// ms : a duration in milliseconds, rounded to the microsecond
func ms(d time.Duration) *float64 {
	v := math.Round(float64(d)/1e3) / 1e3
	return &v
}
