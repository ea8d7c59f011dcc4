package logging

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/hashicorp/go-hclog"
)

// toAttrs converts hclog's alternating key/value args to slog attributes,
// rendering hclog's value helpers (Format, Hex, Octal, Binary, Quote) as
// strings and a CapturedStacktrace under "stacktrace".
func toAttrs(args []interface{}) []slog.Attr {
	attrs := make([]slog.Attr, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			if st, ok := args[i].(hclog.CapturedStacktrace); ok {
				attrs = append(attrs, slog.String("stacktrace", string(st)))
			} else {
				attrs = append(attrs, slog.Any(hclogMissingKey, value(args[i])))
			}
			break
		}
		if st, ok := args[i+1].(hclog.CapturedStacktrace); ok {
			attrs = append(attrs, slog.String("stacktrace", string(st)))
			continue
		}
		attrs = append(attrs, slog.Any(keyString(args[i]), value(args[i+1])))
	}
	return attrs
}

func keyString(k interface{}) string {
	if s, ok := k.(string); ok {
		return s
	}
	return fmt.Sprint(k)
}

func value(v interface{}) interface{} {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) == 0 {
			return ""
		}
		if f, ok := v[0].(string); ok {
			return fmt.Sprintf(f, v[1:]...)
		}
		return fmt.Sprint(v...)
	case hclog.Hex:
		return "0x" + strconv.FormatUint(uint64(v), 16)
	case hclog.Octal:
		return "0" + strconv.FormatUint(uint64(v), 8)
	case hclog.Binary:
		return "0b" + strconv.FormatUint(uint64(v), 2)
	case hclog.Quote:
		return strconv.Quote(string(v))
	default:
		return v
	}
}
