package reliability

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// holdProxy is a TCP proxy between the gateway and PostgreSQL that can
// black-hole: while held it accepts connections and reads what either side
// sends, but passes nothing on and closes nothing, as a partition or a
// stuck network does (the kernel still acknowledges every byte, so TCP on
// the gateway's side sees nothing wrong). Released, it passes on what it
// held, in order. It can also delay: each chunk read is passed on delay
// after it arrived, in each direction, pipelined (what a long or congested
// link does, as netem's delay; not a slower link, which queues).
type holdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	delay time.Duration
	moved *sync.Cond // signalled on release
	conns []net.Conn
}

// setDelay makes every chunk wait d in each direction from now on (0: none).
func (p *holdProxy) setDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// chunk is bytes read and when, for the delayed writer.
type chunk struct {
	b   []byte
	due time.Time
	err error
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
// held, and each until its delay has passed. It never closes dst on its own
// while held: a partition closes nothing. The reader goes on reading while
// chunks wait, so that delays overlap as on a real link.
func (p *holdProxy) copy(dst, src net.Conn) {
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			p.mu.Lock()
			due := time.Now().Add(p.delay)
			p.mu.Unlock()
			chunks <- chunk{b: buf[:n], due: due, err: err}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		for range chunks { // let the reader end once src is closed
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		p.mu.Lock()
		for p.held {
			p.moved.Wait()
		}
		p.mu.Unlock()
		if len(c.b) > 0 {
			if _, werr := dst.Write(c.b); werr != nil {
				src.Close()
				return
			}
		}
		if c.err != nil {
			if c.err == io.EOF {
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
