package coordserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/logbookhq/logbook/client"
	"golang.org/x/net/http2"
)

// recordingProxy forwards one TCP connection at a time to target and keeps
// every byte of both directions.
type recordingProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	toServer bytes.Buffer
	toClient bytes.Buffer
	wg       sync.WaitGroup
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *recordingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go p.pipe(s, c, &p.toServer)
		go p.pipe(c, s, &p.toClient)
	}
}

func (p *recordingProxy) pipe(dst, src net.Conn, rec *bytes.Buffer) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			rec.Write(buf[:n])
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// frameCounts parses a recorded HTTP/2 byte stream and counts frames by type;
// PING frames are counted apart as requests and ACKs.
func frameCounts(t *testing.T, raw []byte, clientSide bool) (counts map[http2.FrameType]int, pings, pingAcks int) {
	t.Helper()
	if clientSide {
		if !bytes.HasPrefix(raw, []byte(http2.ClientPreface)) {
			t.Fatalf("client stream does not start with the HTTP/2 preface")
		}
		raw = raw[len(http2.ClientPreface):]
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(raw))
	fr.SetMaxReadFrameSize(16 << 20)
	counts = map[http2.FrameType]int{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return counts, pings, pingAcks
			}
			t.Fatalf("parse recorded frames: %v", err)
		}
		counts[f.Header().Type]++
		if p, ok := f.(*http2.PingFrame); ok {
			if p.IsAck() {
				pingAcks++
			} else {
				pings++
			}
		}
	}
}

// TestUnaryCallsSendNoFlowControlPings checks the SDK and the coordinator
// use static HTTP/2 windows (internal/grpcflow): with grpc-go's default BDP
// estimation each small reply or request triggers a PING round trip, which
// on loopback cost as many syscalls as the calls themselves.
func TestUnaryCallsSendNoFlowControlPings(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1)
	leader := tc.cfgs[tc.waitLeader()]
	proxy := newRecordingProxy(t, leader.GRPCAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{
		Endpoints:      []string{leader.GRPCAddr},
		AddressMap:     map[string]string{leader.GRPCAddr: proxy.ln.Addr().String()},
		AttemptTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 200
	for i := range calls {
		if _, err := c.Journal().Append(ctx, client.Event{Type: "flow", Payload: bytes.Repeat([]byte{byte(i)}, 256)}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	c.Close()
	proxy.ln.Close()
	proxy.wg.Wait()

	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	up, upPings, _ := frameCounts(t, proxy.toServer.Bytes(), true)
	down, downPings, _ := frameCounts(t, proxy.toClient.Bytes(), false)
	if up[http2.FrameHeaders] < calls || down[http2.FrameHeaders] < calls {
		t.Fatalf("recorded %d request and %d reply HEADERS frames; want >= %d each (the proxy missed the calls)", up[http2.FrameHeaders], down[http2.FrameHeaders], calls)
	}
	if upPings != 0 || downPings != 0 {
		t.Fatalf("%d appends: the client sent %d PINGs and the server %d; want none (BDP estimation must be off)", calls, upPings, downPings)
	}
	if n := up[http2.FrameWindowUpdate] + down[http2.FrameWindowUpdate]; n > calls/10 {
		t.Fatalf("%d appends of 256 bytes caused %d WINDOW_UPDATE frames; want few (windows of %d bytes)", calls, n, 1<<20)
	}
}
