package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/capturedev/capture/store"
)

type loginView struct {
	Next        string
	HasPassword bool
	Error       string
	Notice      string
}

// loginPage shows the sign-in form, or signs in with a one-time link's
// token: opening the link is signing in (it is single use and lasts 15
// minutes; a capture server is on a developer's machine or a CI network,
// out of reach of the link previewers that would use it up).
func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	s, err := h.currentSession(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	next := safeNext(r.URL.Query().Get("next"))
	if s != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if token := r.URL.Query().Get("token"); token != "" {
		h.signIn(w, r, token, "", next)
		return
	}
	h.renderLogin(w, r, http.StatusOK, loginView{Next: next, Notice: takeFlash(w, r)})
}

func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, v loginView) {
	has, err := h.store.HasPassword(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.HasPassword = has
	csrf := ""
	if c, err := r.Cookie(loginCookie); err == nil && c.Value != "" {
		csrf = c.Value
	} else {
		csrf = randomToken()
		setCookie(w, r, loginCookie, csrf, "/login", 3600)
	}
	title := "Sign in"
	h.render(w, r, status, "login", layout{Title: title, CSRF: csrf, Page: v})
}

// login signs in with a password or a one-time link's token.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue(csrfField), c.Value) {
		if refusedProgram(w, r, csrfField, "missing or not the sign-in form's token: send the csrf field "+
			"of the form at /login with the cookie that came with it") {
			return
		}
		h.renderLogin(w, r, http.StatusForbidden, loginView{Next: safeNext(r.PostFormValue("next")),
			Error: "The sign-in form expired. Try again."})
		return
	}
	h.signIn(w, r, r.PostFormValue("token"), r.PostFormValue("password"), safeNext(r.PostFormValue("next")))
}

// signIn checks a one-time link's token, else the password, slowed for a
// client that keeps failing, and on success starts a session and goes to
// next.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request, token, password, next string) {
	attempt, err := h.throttle.acquire(r.Context(), clientOf(r))
	if errors.Is(err, errSignInBusy) {
		w.Header().Set("Retry-After", strconv.Itoa(int(maxSignInDelay/time.Second)))
		h.renderLogin(w, r, http.StatusTooManyRequests, loginView{Next: next,
			Error: "Too many sign-in attempts at once from this address. Wait a few seconds, then try again."})
		return
	}
	if err != nil {
		return // the client went away
	}
	if token != "" {
		err = h.store.UseLoginToken(r.Context(), token)
	} else {
		err = h.store.CheckPassword(r.Context(), password)
	}
	signedIn := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrWrongPassword) {
		h.throttle.release(r.Context(), attempt, false)
		h.fail(w, r, err)
		return
	}
	h.throttle.release(r.Context(), attempt, signedIn)
	if !signedIn {
		v := loginView{Next: next}
		if token != "" {
			v.Error = "This sign-in link cannot be used: it was used already, is older than 15 minutes, " +
				"or was copied incompletely. Run capture user login-link for a new one."
		} else {
			v.Error = "Sign-in failed. Check the password and try again."
		}
		h.renderLogin(w, r, http.StatusUnauthorized, v)
		return
	}

	sess, err := h.store.CreateSession(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	setCookie(w, r, sessionCookie, sess.Token, "/", int(store.SessionLifetime.Seconds()))
	setCookie(w, r, loginCookie, "", "/login", -1)
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		// A link clicked on another site (a CI log, a chat): a browser
		// sends no SameSite=Strict cookie on a redirect of that click, so
		// a 303 would land on the sign-in form with the link used up.
		// This page moves on by itself, as a navigation of this site.
		h.render(w, r, http.StatusOK, "signedin", layout{Title: "Signed in", Refresh: next, Page: loginView{Next: next}})
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session on the server, not only in this browser.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := h.store.EndSession(r.Context(), s.token); err != nil {
		h.fail(w, r, err)
		return
	}
	h.streams.end(s.token)
	setCookie(w, r, sessionCookie, "", "/", -1)
	redirect(w, r, "/login", "Signed out.")
}

// safeNext keeps a post-sign-in destination on this site: a path, which a
// browser cannot read as another host. Browsers drop tabs and line breaks
// from a URL and read a backslash as a slash, so "/<tab>/evil.test" is
// "//evil.test" to them: anything with a control character or a space is
// refused outright.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.HasPrefix(next, "/login") || strings.ContainsFunc(next, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}
