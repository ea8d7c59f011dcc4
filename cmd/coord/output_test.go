package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/logbookhq/logbook/client"
)

func TestEventJSONPayloadEncoding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"text", []byte("hello"), `{"seq":7,"type":"t","payload":"hello","client_id":"c"}`},
		{"unicode and controls", []byte("é\n\"x\""), `{"seq":7,"type":"t","payload":"é\n\"x\"","client_id":"c"}`},
		{"empty", nil, `{"seq":7,"type":"t","payload":"","client_id":"c"}`},
		{"binary", []byte{0xff, 0xfe, 0x00}, `{"seq":7,"type":"t","payload_base64":"//4A","client_id":"c"}`},
		{"truncated utf-8", []byte{'a', 0xc3}, `{"seq":7,"type":"t","payload_base64":"YcM=","client_id":"c"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(toEventJSON(client.StoredEvent{Seq: 7, Type: "t", Payload: tc.payload, ClientID: "c"}))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(got, want) {
				t.Fatalf("got %s, want %s", b, tc.want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestTablePayload(t *testing.T) {
	if got := tablePayload([]byte("a\tb\nc")); got != `a\tb\nc` {
		t.Errorf("controls: %q", got)
	}
	if got := tablePayload([]byte{0xff}); got != "base64:/w==" {
		t.Errorf("binary: %q", got)
	}
	long := tablePayload([]byte(strings.Repeat("ü", 200)))
	if n := utf8.RuneCountInString(long); n != tablePayloadWidth || !strings.HasSuffix(long, "…") {
		t.Errorf("long payload: %d runes %q", n, long)
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{0.5: 500, 0.99: 990, 0.999: 999, 1: 1000} {
		if got := percentile(s, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("empty")
	}
}

func TestReservoirBounded(t *testing.T) {
	r := reservoir{cap: 10, rng: newTestRand()}
	for i := 0; i < 1000; i++ {
		r.add(time.Duration(i))
	}
	if len(r.samples) != 10 || r.seen != 1000 {
		t.Fatalf("kept %d of %d", len(r.samples), r.seen)
	}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
