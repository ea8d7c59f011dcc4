package export

import "io"

// A window asks its reader for at least minChunk bytes at a time, growing
// to readChunk once the stream has proved to be that long.
const (
	minChunk  = 1 << 10
	readChunk = 64 << 10
)

// window is a forward-only buffered view of a stream, addressed by absolute
// offset. Its buffer grows only as bytes actually arrive, so asking for a
// huge (corrupt) length costs at most the bytes the stream really has.
type window struct {
	r    io.Reader
	arr  []byte // backing storage
	buf  []byte // buffered bytes; buf[0] is at offset base
	base int64
	err  error // sticky: io.EOF at the end, or the reader's error
}

func newWindow(r io.Reader) *window { return &window{r: r} }

// avail returns how many bytes are buffered from off onward.
func (w *window) avail(off int64) int {
	if n := int64(len(w.buf)) - (off - w.base); n > 0 {
		return int(n)
	}
	return 0
}

// ensure makes bytes [off, off+n) available, reading as needed, and reports
// whether it could. off must not be below the discard point.
func (w *window) ensure(off int64, n int) bool {
	need := int(off-w.base) + n
	for zero := 0; len(w.buf) < need; {
		if w.err != nil {
			return false
		}
		w.room()
		m, err := w.r.Read(w.buf[len(w.buf):cap(w.buf)])
		if m < 0 || m > cap(w.buf)-len(w.buf) {
			m, err = 0, io.ErrShortBuffer // misbehaving reader
		}
		w.buf = w.buf[:len(w.buf)+m]
		switch {
		case err != nil:
			w.err = err
		case m == 0:
			if zero++; zero > 100 {
				w.err = io.ErrNoProgress
			}
		default:
			zero = 0
		}
	}
	return true
}

// room guarantees space to read at least a chunk more bytes, compacting
// or reallocating so storage stays within about twice the live bytes.
func (w *window) room() {
	chunk := int(min(readChunk, max(minChunk, w.end())))
	if cap(w.buf)-len(w.buf) >= chunk {
		return
	}
	live := len(w.buf)
	if cap(w.arr) < live+chunk || cap(w.arr) > 4*(live+readChunk) {
		w.arr = make([]byte, 2*live+chunk)
	}
	copy(w.arr, w.buf)
	w.buf = w.arr[:live]
}

// slice returns buffered bytes [off, off+n); ensure(off, n) must have
// succeeded. The result is valid until the next ensure or discard.
func (w *window) slice(off int64, n int) []byte {
	i := int(off - w.base)
	return w.buf[i : i+n : i+n]
}

// discard drops buffered bytes before off.
func (w *window) discard(off int64) {
	k := min(int64(len(w.buf)), off-w.base)
	if k > 0 {
		w.buf = w.buf[k:]
		w.base += k
	}
}

// end returns the offset just past the last byte read so far.
func (w *window) end() int64 { return w.base + int64(len(w.buf)) }

// ioErr returns the reader's error, if it was anything but io.EOF.
func (w *window) ioErr() error {
	if w.err == io.EOF {
		return nil
	}
	return w.err
}

// drain reads to the end of the stream, discarding, and returns its size.
func (w *window) drain() int64 {
	for w.ensure(w.end(), 1) {
		w.discard(w.end())
	}
	return w.end()
}
