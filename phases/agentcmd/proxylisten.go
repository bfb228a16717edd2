package agentcmd

import (
	"errors"
	"net"
	"sync"
)

// The local proxy's listener: loopback clients only, and a bound on how
// many connections are open at once.

// proxyMaxConns bounds the agent's connections to the local proxy at once:
// each costs the driver's process two file descriptors (the agent's and
// the upstream's), which it needs for its own work too.
const proxyMaxConns = 256

// loopbackListener accepts connections from loopback addresses only, at
// most proxyMaxConns at once (a connection over the bound is closed at
// once).
type loopbackListener struct {
	net.Listener
	open chan struct{} // a slot per open connection
}

func newLoopbackListener(ln net.Listener) loopbackListener {
	return loopbackListener{Listener: ln, open: make(chan struct{}, proxyMaxConns)}
}

func (l loopbackListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			_ = c.Close()
			continue
		}
		select {
		case l.open <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.open }}, nil
		default:
			_ = c.Close()
		}
	}
}

// slotConn gives its listener's slot back when closed (once).
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// CloseWrite half-closes the connection, as a tunnel's splice does when
// the other side has sent everything (the agent may still be sending).
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
