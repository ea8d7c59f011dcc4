package replica

import "sync/atomic"

// failpointHook, when set (tests only), is called at every crash-relevant
// step of an operation (names in doc.go, e.g. "finalize/after-meta-rename").
// A non-nil error makes the operation return it at that point, leaving the
// disk exactly as a crash there would.
var failpointHook atomic.Pointer[func(name string) error]

func failpoint(name string) error {
	if h := failpointHook.Load(); h != nil {
		return (*h)(name)
	}
	return nil
}
