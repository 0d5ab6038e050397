// Command healthcheck is the container's HEALTHCHECK probe: the final image
// is distroless (no shell, no curl, no wget), so this small static binary
// asks the gateway's /healthz and exits 0 when it answers 200, 1 otherwise.
//
//	healthcheck [URL]
//
// Without a URL it probes http://127.0.0.1:<port>/healthz, the port taken
// from LISTEN_ADDR (default 8080), so a changed LISTEN_ADDR needs no change
// to the image. It uses only the standard library.
//
// Imports from this module: none.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	url := probeURL(os.Args[1:], os.Getenv("LISTEN_ADDR"))
	if err := probe(url); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// probeURL returns the URL to probe: the first argument if given, else
// /healthz on the loopback address at LISTEN_ADDR's port.
func probeURL(args []string, listenAddr string) string {
	if len(args) > 0 && args[0] != "" {
		return args[0]
	}
	port := "8080"
	if _, p, err := net.SplitHostPort(listenAddr); err == nil && p != "" {
		port = p
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz"
}

func probe(url string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
