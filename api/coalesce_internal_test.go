package api

import (
	"bytes"
	"net"
	"testing"
)

// countingConn is a net.Conn that counts and keeps its writes.
type countingConn struct {
	net.Conn
	writes int
	got    bytes.Buffer
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	return c.got.Write(p)
}

func TestCoalescingConnGathersWritesIntoOne(t *testing.T) {
	under := &countingConn{}
	c := &coalescingConn{Conn: under}
	if _, err := c.Write([]byte("a")); err != nil || under.writes != 1 {
		t.Fatalf("a write outside a gather: %d writes, %v", under.writes, err)
	}
	c.gather()
	for _, s := range []string{"b", "c", "d"} {
		if n, err := c.Write([]byte(s)); n != 1 || err != nil {
			t.Fatalf("gathered write: %d, %v", n, err)
		}
	}
	if under.writes != 1 {
		t.Fatalf("%d writes reached the socket while gathering", under.writes)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if under.writes != 2 || under.got.String() != "abcd" {
		t.Fatalf("after flush: %d writes of %q, want 2 of \"abcd\"", under.writes, under.got.String())
	}
	if err := c.flush(); err != nil || under.writes != 2 {
		t.Fatalf("an empty flush wrote: %d writes, %v", under.writes, err)
	}
	c.gather()
	_, _ = c.Write(make([]byte, maxCoalesce))
	if !c.full() {
		t.Fatal("a gather of maxCoalesce bytes is not full")
	}
	_ = c.flush()
}
