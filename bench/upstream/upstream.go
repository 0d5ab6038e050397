package upstream

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// E2B is the E2B API as the reference servers call it.
type E2B struct {
	base, key string
	hc        *http.Client
}

// Flags defines and parses the reference servers' flags (-listen, -e2b,
// -e2b-key) and returns the address to serve on and the E2B API to call.
func Flags() (listen string, e2b *E2B) {
	l := flag.String("listen", "127.0.0.1:0", "address to serve on")
	base := flag.String("e2b", "", "E2B API base URL")
	key := flag.String("e2b-key", "", "E2B API key")
	flag.Parse()
	// As many idle connections as the benchmark's clients, so that no call
	// pays for a new one.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	return *l, &E2B{base: *base, key: *key, hc: hc}
}

// GetSandbox is the gateway's E2B call for e2b_get_sandbox: GET
// /sandboxes/{id} with the key, its body read up to 1 MiB. Any status but
// 200 is an error.
func (e *E2B) GetSandbox(ctx context.Context, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/sandboxes/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", e.key)
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("e2b answered %s", resp.Status)
	}
	return b, nil
}
