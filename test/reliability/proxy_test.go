package reliability

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// holdProxy is a TCP proxy between the gateway and PostgreSQL that can
// black-hole: while held it accepts connections and reads what either side
// sends, but passes nothing on and closes nothing, as a partition or a
// stuck network does (the kernel still acknowledges every byte, so TCP on
// the gateway's side sees nothing wrong). Released, it passes on what it
// held, in order.
type holdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	moved *sync.Cond // signalled on release
	conns []net.Conn
}

// newHoldProxy proxies a listener on 127.0.0.1 to target (host:port); it
// stops with the test.
func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target}
	p.moved = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() {
		p.hold(false)
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

// dsn is dsn with its host and port replaced by the proxy's.
func (p *holdProxy) dsn(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// hold black-holes the proxy (on) or releases it.
func (p *holdProxy) hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = on
	if !on {
		p.moved.Broadcast()
	}
}

func (p *holdProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *holdProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	go p.copy(server, client)
	p.copy(client, server)
}

// copy moves bytes from src to dst, holding each chunk while the proxy is
// held. It never closes dst on its own while held: a partition closes
// nothing.
func (p *holdProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held {
				p.moved.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			p.mu.Lock()
			for p.held {
				p.moved.Wait()
			}
			p.mu.Unlock()
			if err == io.EOF {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			dst.Close()
			return
		}
	}
}
