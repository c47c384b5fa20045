// Command webhook-provider serves webhooktest.Provider, the test stand-in for an
// external webhook provider, for local runs of the whole stack: ministack has
// no SMS service, so the local stage sends SMS through the webhook transport
// to this process.
//
//	webhook-provider --secret-file FILE [--addr 127.0.0.1:4599] [--key-window 0]
//
// Every request but GET /messages must carry a valid Webhook-Signature (see
// pkg/webhook: HMAC-SHA-256 under the stack's signing secret); others get
// 401. The secret is read from FILE at every request (one secret per line;
// two while one is rotated), so the deploy can write it after the stack
// exists and a redeployed stack's new secret applies without a restart. A
// missing or empty FILE refuses every request. localstack/deploy-local.sh
// writes the stage's secret there (devstack webhook-secret).
//
// Routes (see webhooktest.Provider):
//
//	POST /send           accept one message (records it, answers {"id": ...})
//	GET  /messages       JSON list of the recorded messages, oldest first
//	GET  /<key>          lookup by idempotency key: 200 {"id": ...} or 404
//
// The provider keeps whole messages (address, body, reset link) in memory:
// it is a test double, never run it where real notifications go. It logs one
// JSON line per request to stderr, without the message content.
//
// The default address is 127.0.0.1:$PORT, or 127.0.0.1:4599 when PORT is
// unset. SIGINT or SIGTERM stops it after in-flight requests finish.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

// DefaultPort is the port the local stage's webhookUrl points at.
const DefaultPort = "4599"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "webhook-provider:", err)
		os.Exit(2)
	}
}

// run parses args, listens and serves until ctx is done. ready, if not nil,
// receives the listening address once the server accepts connections.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	port := getenv("PORT")
	if port == "" {
		port = DefaultPort
	}
	fs := flag.NewFlagSet("webhook-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", net.JoinHostPort("127.0.0.1", port), "listen `address` (default 127.0.0.1:$PORT, PORT default "+DefaultPort+")")
	secretFile := fs.String("secret-file", "", "`file` holding the webhook signing secret(s), one per line, read at every request (required)")
	keyWindow := fs.Duration("key-window", 0,
		"how long the provider deduplicates by Idempotency-Key; 0 records every POST, so a test sees every send "+
			"(the provider keeps keys for its lifetime, so any positive value means it honors keys)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *keyWindow < 0 {
		return errors.New("--key-window must not be negative")
	}
	if *secretFile == "" {
		return errors.New("--secret-file is required: every request is checked against the webhook signing secret")
	}

	log := slog.New(slog.NewJSONHandler(stderr, nil))
	provider := webhooktest.NewProvider(webhooktest.ProviderConfig{HonorKeys: *keyWindow > 0, Secrets: secretsFrom(*secretFile)})
	srv := &http.Server{
		Handler:           logged(log, provider),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("webhook provider listening", "addr", ln.Addr().String(), "honor_keys", *keyWindow > 0,
		"send_url", "http://"+ln.Addr().String()+"/send", "messages_url", "http://"+ln.Addr().String()+"/messages")
	if ready != nil {
		ready <- ln.Addr().String()
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	log.Info("webhook provider stopped", "messages", len(provider.Messages()))
	return err
}

// secretsFrom returns the secrets in file, one per non-empty line, read at
// every call; none if the file cannot be read.
func secretsFrom(file string) func() [][]byte {
	return func() [][]byte {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil
		}
		var out [][]byte
		for _, line := range bytes.Split(raw, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) > 0 {
				out = append(out, line)
			}
		}
		return out
	}
}

// logged logs one line per request: method, path, status, idempotency key and
// duration. Never the body: it holds the address and the reset link.
func logged(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration_ms", time.Since(start).Milliseconds()}
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			attrs = append(attrs, "idempotency_key", key)
		}
		log.Info("request", attrs...)
	})
}

// statusRecorder remembers the status code. It forwards Hijack so the
// provider's AcceptThenDrop step can still close the connection.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Hijack hands the connection over; the logged status is then "dropped" (0).
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	r.status = 0
	return hj.Hijack()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
