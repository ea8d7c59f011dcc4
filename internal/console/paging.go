package console

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Paging bounds: a page holds 1..MaxPageSize rows (DefaultPageSize when
// not asked); a filter is at most MaxFilterBytes.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	MaxFilterBytes  = 256
)

// Query is a table's paging, filter and sort, as the request asked them
// and clamped: the page shows what it applied.
type Query struct {
	// Limit is the page size, Offset the first row (clamped to the
	// filtered table's size).
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	// Filter is matched as a literal substring (case-insensitive):
	// regular-expression characters mean themselves.
	Filter string `json:"filter,omitempty"`
	// Sort is a column of the table's own list; Desc reverses it.
	Sort string `json:"sort,omitempty"`
	Desc bool   `json:"desc,omitempty"`
}

// PageInfo is what a paged table reports beside its rows.
type PageInfo struct {
	Query
	// Total is the number of rows the filter matched; Shown how many of
	// them this page holds.
	Total int `json:"total"`
	Shown int `json:"shown"`
	// Sorts are the columns the table sorts by.
	Sorts []string `json:"sorts,omitempty"`
}

// parseQuery reads limit, offset, q, sort and desc; out-of-range numbers
// are clamped rather than refused, an unknown sort column falls back to
// the first of sorts.
func parseQuery(r *http.Request, sorts ...string) Query {
	v := r.URL.Query()
	q := Query{Limit: clampInt(v.Get("limit"), DefaultPageSize, 1, MaxPageSize), Offset: clampInt(v.Get("offset"), 0, 0, 1<<31-1)}
	q.Filter = clip(v.Get("q"), MaxFilterBytes)
	q.Filter = strings.TrimSuffix(q.Filter, "…")
	if s := v.Get("sort"); slices.Contains(sorts, s) {
		q.Sort = s
	} else if len(sorts) > 0 {
		q.Sort = sorts[0]
	}
	q.Desc = v.Get("desc") == "1" || v.Get("desc") == "true"
	return q
}

// clampInt parses s as a decimal in [lo, hi]: def when absent or not a
// number, the nearest bound when out of range.
func clampInt(s string, def, lo, hi int) int {
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			if strings.HasPrefix(s, "-") {
				return lo
			}
			return hi
		}
		return def
	}
	return int(max(int64(lo), min(int64(hi), n)))
}

// matches reports whether any of fields holds filter as a literal,
// case-insensitive substring ("" matches everything).
func matches(filter string, fields ...string) bool {
	if filter == "" {
		return true
	}
	f := strings.ToLower(filter)
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// pageOf filters rows with keep, sorts them by q.Sort with less (a
// comparison per sort column, ties broken by the table's order), and
// cuts the page; it clamps q.Offset to the filtered size.
func pageOf[T any](rows []T, q Query, sorts []string, keep func(T) bool, cmpBy func(col string, a, b T) int) ([]T, PageInfo) {
	kept := make([]T, 0, len(rows))
	for _, r := range rows {
		if keep(r) {
			kept = append(kept, r)
		}
	}
	if cmpBy != nil && q.Sort != "" {
		slices.SortStableFunc(kept, func(a, b T) int {
			c := cmpBy(q.Sort, a, b)
			if q.Desc {
				return -c
			}
			return c
		})
	}
	q.Offset = min(q.Offset, max(0, len(kept)-1))
	if len(kept) == 0 {
		q.Offset = 0
	}
	end := min(len(kept), q.Offset+q.Limit)
	out := kept[q.Offset:end]
	return out, PageInfo{Query: q, Total: len(kept), Shown: len(out), Sorts: sorts}
}

// compare is cmp.Compare for the sort functions.
func compare[T cmp.Ordered](a, b T) int { return cmp.Compare(a, b) }

// Prev and Next are the offsets of the neighbouring pages (-1: none).
func (p PageInfo) Prev() int {
	if p.Offset == 0 {
		return -1
	}
	return max(0, p.Offset-p.Limit)
}

func (p PageInfo) Next() int {
	if p.Offset+p.Limit >= p.Total {
		return -1
	}
	return p.Offset + p.Limit
}
