package console

import (
	"errors"
	"net/http"
	"strings"
)

// CookieName is the login cookie: the bearer token the login form took,
// HttpOnly, SameSite=Strict, Secure on HTTPS.
const CookieName = "logbook_console_token"

// maxLoginBytes bounds the login form's body.
const maxLoginBytes = 4 << 10

// requestToken is the request's bearer token: its Authorization header
// ("Bearer lbt_…"), else the login cookie; "" for none.
func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		return h
	}
	if ck, err := r.Cookie(CookieName); err == nil && ck.Value != "" {
		return "Bearer " + ck.Value
	}
	return ""
}

// login serves the token form (GET) and takes a token (POST): checked by
// the Gate as any request's token is, then kept in the login cookie. A
// refused token sets nothing.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.renderLogin(w, r, http.StatusOK, "")
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		c.fail(w, r, http.StatusMethodNotAllowed, "the login form takes GET and POST only")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "the form could not be read: "+clip(err.Error(), 200))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if tok == "" {
		c.renderLogin(w, r, http.StatusBadRequest, "enter a token (lbt_…)")
		return
	}
	if c.cfg.Gate == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if _, _, err := c.cfg.Gate(r, "Bearer "+tok); err != nil {
		code := http.StatusForbidden
		var ref *Refusal
		if errors.As(err, &ref) {
			code = ref.Status
		}
		c.renderLogin(w, r, code, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, Secure: c.cfg.SecureCookie, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout drops the login cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		c.fail(w, r, http.StatusMethodNotAllowed, "log out with POST")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.cfg.SecureCookie, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, code int, reason string) {
	c.renderStatus(w, code, "login", page{Title: "Log in", Nav: "login", Status: code, LoginReason: reason})
}
