package replica

import (
	"bytes"
	"testing"
)

func FuzzReadMeta(f *testing.F) {
	good := append(DefaultMetaHeader(512).Encode(), encodeSums([]uint32{1, 2, 3})...)
	f.Add(good)
	f.Add(good[:5])
	f.Add(good[:MetaHeaderSize+2])
	f.Add([]byte("LBKM\x00\x01\x02\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseMetaHeader(b)
		if err == nil {
			if KindOf(err) != KindUnknown {
				t.Fatal("kind on success")
			}
			if !bytes.Equal(h.Encode(), b[:MetaHeaderSize]) {
				t.Fatalf("header does not round-trip")
			}
			if h.BytesPerChecksum == 0 || h.BytesPerChecksum > MaxBytesPerChecksum {
				t.Fatalf("accepted bpc %d", h.BytesPerChecksum)
			}
			n := (len(b) - MetaHeaderSize) / ChecksumSize
			sums, err := ReadChecksums(bytes.NewReader(b[MetaHeaderSize:]), n)
			if err != nil || len(sums) != n {
				t.Fatalf("read %d checksums: %v", n, err)
			}
			if _, err := ReadChecksums(bytes.NewReader(b[MetaHeaderSize:]), n+1); KindOf(err) != KindCorrupt {
				t.Fatalf("short checksums: %v", err)
			}
		} else if KindOf(err) != KindCorrupt {
			t.Fatalf("header error kind %v", KindOf(err))
		}
		if _, _, err := ParseMeta(b); err != nil && KindOf(err) != KindCorrupt {
			t.Fatalf("parse meta error kind %v", KindOf(err))
		}
		if _, err := ReadMetaHeader(bytes.NewReader(b)); err != nil && KindOf(err) != KindCorrupt {
			t.Fatalf("read header kind %v", KindOf(err))
		}
	})
}

func FuzzParseFileName(f *testing.F) {
	for _, s := range []string{"blk_1", "blk_1_2.meta", "blk_01", "blk_1_2.meta.trunc", "blk_/x", "blk_18446744073709551616", "blk_1_x.meta", "blk_7.restart", "blk_1_2.restart"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fn, ok := parseFileName(s)
		if !ok {
			return
		}
		want := blockName(fn.id)
		if fn.restart {
			want = restartName(fn.id)
		}
		if fn.meta {
			want = metaName(fn.id, fn.gs)
			if fn.trunc {
				want += truncSuffix
			}
		}
		if want != s {
			t.Fatalf("%q parsed as %+v, which names %q", s, fn, want)
		}
	})
}

func FuzzValidatePoolID(f *testing.F) {
	for _, s := range []string{"BP-1-10.0.0.1-1", "..", "a/b", ".x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidatePoolID(s) == nil && (s == "." || s == ".." || bytes.ContainsAny([]byte(s), "/\\\x00") || s[0] == '.') {
			t.Fatalf("accepted %q", s)
		}
	})
}

// FuzzLoadRbw: any bytes as an rbw replica's data and meta files load
// without panicking into a replica whose every byte verifies.
func FuzzLoadRbw(f *testing.F) {
	data := tdata(1, 1500)
	f.Add(data, append(DefaultMetaHeader(512).Encode(), encodeSums(ChecksumsPerChunk(data, 512))...))
	f.Add(data, DefaultMetaHeader(512).Encode()[:7])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, data, meta []byte) {
		m := NewMemFS()
		cfg := tconfig("/v")
		m.Mkdir("/v", 0o755)
		pp := newPoolPaths("/v", tpool)
		if err := mkdirAllDurable(m, pp.rbw); err != nil {
			t.Fatal(err)
		}
		writeFileDurable(m, pp.rbw+"/"+blockName(5), data)
		writeFileDurable(m, pp.rbw+"/"+metaName(5, 9), meta)
		d, err := NewMemStore(bg, cfg, m)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ri, err := d.GetReplica(tpool, 5)
		if err != nil || ri.State != StateRWR || ri.NumBytes > int64(len(data)) {
			t.Fatalf("%+v, %v", ri, err)
		}
		if ri.NumBytes > 0 {
			if got := readAllT(t, d, 5); !bytes.Equal(got, data[:ri.NumBytes]) {
				t.Fatal("loaded bytes differ")
			}
		}
	})
}
