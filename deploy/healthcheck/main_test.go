package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProbeURL(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		listenAddr string
		want       string
	}{
		{name: "default", want: "http://127.0.0.1:8080/healthz"},
		{name: "listen addr port", listenAddr: ":9090", want: "http://127.0.0.1:9090/healthz"},
		{name: "listen addr with host", listenAddr: "0.0.0.0:7000", want: "http://127.0.0.1:7000/healthz"},
		{name: "explicit url", args: []string{"http://127.0.0.1:1/x"}, listenAddr: ":9090", want: "http://127.0.0.1:1/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := probeURL(tt.args, tt.listenAddr); got != tt.want {
				t.Fatalf("probeURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if err := probe(srv.URL + "/healthz"); err != nil {
		t.Fatalf("probe() err = %v, want nil", err)
	}
	status = http.StatusServiceUnavailable
	if err := probe(srv.URL + "/healthz"); err == nil {
		t.Fatal("probe() of a 503 err = nil, want an error")
	}
	srv.Close()
	if err := probe(srv.URL + "/healthz"); err == nil {
		t.Fatal("probe() of a closed server err = nil, want an error")
	}
}
