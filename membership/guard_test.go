package membership

import (
	"bytes"
	"compress/lzw"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// frame returns typ followed by the msgpack encoding of v.
func frame(t *testing.T, typ byte, v any) []byte {
	t.Helper()
	buf := bytes.NewBuffer([]byte{typ})
	if err := codec.NewEncoder(buf, &codec.MsgpackHandle{}).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func labelled(b []byte) []byte {
	return append(append([]byte{wireLabel, byte(len(testCluster))}, testCluster...), b...)
}

// hostileFrames are streams that crash an unguarded memberlist v0.5.4.
func hostileFrames(t *testing.T) map[string][]byte {
	var empty bytes.Buffer
	w := lzw.NewWriter(&empty, lzw.LSB, 8)
	w.Close()
	return map[string][]byte{
		"negative node count": frame(t, wirePushPull, pushPullHeader{Nodes: -1}),
		"huge node count":     frame(t, wirePushPull, pushPullHeader{Nodes: 1 << 40}),
		"huge user state":     frame(t, wirePushPull, pushPullHeader{UserStateLen: 1 << 40}),
		"negative user msg":   frame(t, wireUser, struct{ UserMsgLen int }{-1}),
		"empty decompression": frame(t, wireCompress, struct {
			Algo int
			Buf  []byte
		}{0, empty.Bytes()}),
	}
}

func TestCheckStream(t *testing.T) {
	for name, f := range hostileFrames(t) {
		if err := checkStream(bytes.NewReader(labelled(f)), true); err == nil {
			t.Errorf("%s: accepted inbound", name)
		}
		if err := checkStream(bytes.NewReader(f), false); err == nil {
			t.Errorf("%s: accepted outbound", name)
		}
	}
	if err := checkStream(bytes.NewReader(nil), true); err != errEmptyStream {
		t.Errorf("empty stream: %v", err)
	}
	// Legitimate streams pass and replay byte for byte.
	ok := append(frame(t, wirePushPull, pushPullHeader{Nodes: 3, Join: true}), "rest of the state"...)
	for _, in := range [][]byte{labelled(ok), ok, labelled([]byte{0, 1, 2}), {10, 0, 0, 0, 5}} {
		cr := &captureReader{r: bytes.NewReader(in)}
		if err := checkStream(cr, true); err != nil {
			t.Fatalf("rejected %q: %v", in, err)
		}
		got, _ := io.ReadAll(io.MultiReader(bytes.NewReader(cr.buf), bytes.NewReader(in[len(cr.buf):])))
		if !bytes.Equal(got, in) {
			t.Fatalf("replay = %q, want %q", got, in)
		}
	}
}

// TestCraftedStreamsDoNotCrash sends streams that would panic memberlist
// v0.5.4 to a running member; it must survive and keep admitting members.
func TestCraftedStreamsDoNotCrash(t *testing.T) {
	a := start(t, testConfig("a"))
	for name, f := range hostileFrames(t) {
		conn, err := net.DialTimeout("tcp", a.LocalAddr(), time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(labelled(f))
		_, _ = io.Copy(io.Discard, conn) // until the member hangs up
		conn.Close()
	}
	b := start(t, testConfig("b", a.LocalAddr()))
	waitConverged(t, []*Memberlist{a, b}, "a", "b")
}

// TestHostileSeedDoesNotCrash points a member at a fake seed that answers
// push/pull with streams that would panic memberlist v0.5.4.
func TestHostileSeedDoesNotCrash(t *testing.T) {
	frames := hostileFrames(t)
	var replies [][]byte
	for _, f := range frames {
		replies = append(replies, f)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	served := make(chan struct{}, 1024)
	go func() {
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = conn.Read(make([]byte, 4096)) // the joiner's state
			_, _ = conn.Write(replies[i%len(replies)])
			conn.Close()
			served <- struct{}{}
		}
	}()

	x := start(t, testConfig("x", ln.Addr().String()))
	for range 2 * len(replies) {
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("join loop stopped contacting the fake seed")
		}
	}
	if got := names(x); !sameNames(got, []string{"x"}) {
		t.Fatalf("x sees %v", got)
	}
	y := start(t, testConfig("y", x.LocalAddr()))
	waitConverged(t, []*Memberlist{x, y}, "x", "y")
}

// TestCloseUnderConnectionLoad closes a member while connections keep
// arriving; Close must not hang on the transport's accept loop.
func TestCloseUnderConnectionLoad(t *testing.T) {
	for range 5 {
		m := start(t, testConfig("a"))
		addr := m.LocalAddr()
		stop := make(chan struct{})
		dialersDone := make(chan struct{})
		go func() {
			defer close(dialersDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
					c.Close()
				}
			}
		}()
		closed := make(chan error, 1)
		go func() { closed <- m.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close hung while connections were arriving")
		}
		close(stop)
		<-dialersDone
	}
}

// TestTransportHeldBackUntilOpen: before open (memberlist.Create has not
// returned), inbound packets are dropped and streams closed, so nothing
// can be merged before memberlist records the local member; after open
// both reach memberlist.
func TestTransportHeldBackUntilOpen(t *testing.T) {
	tr, err := newGuardedTransport("127.0.0.1", 0, testLogger(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.GetAutoBindPort()))
	udp, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()

	if _, err := udp.Write([]byte("early")); err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write(labelled([]byte{wirePushPull}))
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Closed: EOF, or a reset as the early bytes were never read.
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stream before open: read = %v, want it closed", err)
	}
	conn.Close()

	waitFor(t, 10*time.Second, "the early packet to be dropped", func() bool { return tr.early.Load() == 1 })
	tr.open()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case p := <-tr.PacketCh():
			if string(p.Buf) == "early" {
				t.Fatal("a packet sent before open was delivered")
			}
			if string(p.Buf) != "late" {
				t.Fatalf("packet %q", p.Buf)
			}
			return
		case <-tick.C: // UDP may drop: resend until one arrives
			_, _ = udp.Write([]byte("late"))
		case <-deadline:
			t.Fatal("no packet delivered after open")
		}
	}
}
