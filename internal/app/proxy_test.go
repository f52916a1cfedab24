package app

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"seckill/internal/store/storetest"
)

// tcpProxy stands between the service and Postgres so a test can make
// Postgres unreachable (refusing new connections and cutting open ones) and
// bring it back, without touching the real server.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isDown bool
	conns  map[net.Conn]struct{}
}

// newPostgresProxy returns a proxy to a fresh test database and the DSN that
// reaches that database through it.
func newPostgresProxy(t *testing.T) (*tcpProxy, string) {
	t.Helper()
	u, err := url.Parse(storetest.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.down() })
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isDown {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *tcpProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// down refuses new connections and cuts the open ones.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) up() {
	p.mu.Lock()
	p.isDown = false
	p.mu.Unlock()
}
