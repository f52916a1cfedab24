package graph

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// initFirst makes the graphql-transport-ws protocol's rule hold that gqlgen
// leaves out: a subscribe message before connection_init closes the socket
// with 4401 Unauthorized (gqlgen closes with 1002, a protocol error, which
// clients may answer by reconnecting). It looks at messages only until
// connection_init.
type initFirst struct {
	transport.WebsocketImplementation
}

func (i initFirst) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	conn, err := i.WebsocketImplementation.Accept(w, r, opts)
	if err != nil || conn.Subprotocol() != "graphql-transport-ws" {
		return conn, err
	}
	return &initFirstConn{WebsocketConn: conn}, nil
}

type initFirstConn struct {
	transport.WebsocketConn
	initialised bool
}

var (
	_ transport.WebsocketReadLimiter   = (*initFirstConn)(nil)
	_ transport.WebsocketReadDeadliner = (*initFirstConn)(nil)
)

func (c *initFirstConn) NextReader() (int, io.Reader, error) {
	typ, r, err := c.WebsocketConn.NextReader()
	if err != nil || c.initialised {
		return typ, r, err
	}
	msg, err := io.ReadAll(r) // bounded by the read limit
	if err != nil {
		return typ, nil, err
	}
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(msg, &m) // gqlgen reports what does not decode
	switch m.Type {
	case "connection_init":
		c.initialised = true
	case "subscribe":
		_ = c.WriteClose(CloseUnauthorized, "Unauthorized")
		return typ, nil, transport.ErrWebsocketClosed
	}
	return typ, bytes.NewReader(msg), nil
}

// SetReadLimit and SetReadDeadline pass the transport's limits on, if the
// connection takes them.
func (c *initFirstConn) SetReadLimit(limit int64) {
	if l, ok := c.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

func (c *initFirstConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}
