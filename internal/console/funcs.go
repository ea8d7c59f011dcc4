package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"chart":    chartSVG,
	"ms":       fmtMs,
	"bytes":    fmtBytes,
	"when":     fmtTime,
	"link":     pageLink,
	"sortLink": sortLink,
	"q":        url.QueryEscape,
	"join":     strings.Join,
	"num":      func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
	"fixed":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"inc":      func(n int) int { return n + 1 },
	"inc64":    func(n uint64) uint64 { return n + 1 },
	"sub1":     func(n int) int { return n - 1 },
	"add":      func(a, b int) int { return a + b },
	"pg": func(base, prefix string, p PageInfo) map[string]any {
		return map[string]any{"Base": base, "Prefix": prefix, "P": p}
	},
	"flt": func(action, prefix string, p PageInfo, hidden ...string) map[string]any {
		h := map[string]string{}
		for i := 0; i+1 < len(hidden); i += 2 {
			h[hidden[i]] = hidden[i+1]
		}
		return map[string]any{"Action": action, "Prefix": prefix, "P": p, "Hidden": h}
	},
}

// chartSVG draws ch as an inline SVG polyline, 300×60, the latest point
// at the right; an empty chart says it is waiting for samples.
func chartSVG(ch Chart) template.HTML {
	const w, h = 300.0, 60.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s" preserveAspectRatio="none">`, w, h, template.HTMLEscapeString(ch.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%g" height="%g" class="chart-bg"/>`, w, h)
	n := len(ch.Points)
	if n >= 2 {
		top := ch.Max
		if top <= 0 {
			top = 1
		}
		b.WriteString(`<polyline class="chart-line" points="`)
		for i, v := range ch.Points {
			x := w * float64(i) / float64(n-1)
			y := h - 2 - (h-4)*v/top
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// fmtMs is a duration in milliseconds in words; "-" for a negative one
// (never, or did not answer).
func fmtMs(ms int64) string {
	switch {
	case ms < 0:
		return "-"
	case ms < 10_000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 600_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

func fmtBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// pageLink is base (a path, maybe with a query) with a table's paging
// (its parameters prefixed) and kv's changes ("offset", "50", …).
func pageLink(base, prefix string, p PageInfo, kv ...string) string {
	v := url.Values{}
	v.Set(prefix+"limit", strconv.Itoa(p.Limit))
	v.Set(prefix+"offset", strconv.Itoa(p.Offset))
	if p.Filter != "" {
		v.Set(prefix+"q", p.Filter)
	}
	if p.Sort != "" {
		v.Set(prefix+"sort", p.Sort)
	}
	if p.Desc {
		v.Set(prefix+"desc", "1")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			v.Del(prefix + kv[i])
		} else {
			v.Set(prefix+kv[i], kv[i+1])
		}
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + v.Encode()
}

// sortLink sorts the table by col, the other way round if it is sorted
// by col already, from its first row.
func sortLink(base, prefix string, p PageInfo, col string) string {
	desc := ""
	if p.Sort == col && !p.Desc {
		desc = "1"
	}
	return pageLink(base, prefix, p, "sort", col, "desc", desc, "offset", "0")
}
