package smtp

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/capturedev/capture/server/admission"
	"github.com/capturedev/capture/server/ingest"
	"github.com/capturedev/capture/server/mailparse"
	"github.com/capturedev/capture/server/outage"
	"github.com/capturedev/capture/store"
)

const (
	// authTimeout bounds the store lookups of one AUTH.
	authTimeout = 10 * time.Second
	// maxPooledBuffer keeps the odd huge message's buffer out of the pool.
	maxPooledBuffer = 1 << 20
)

// Replies of SPEC §6 and RFC 4954, in one place.
var (
	errAuthRequired = &gosmtp.SMTPError{Code: 530, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0},
		Message: "Authentication required"}
	errEncryptionRequired = &gosmtp.SMTPError{Code: 538, EnhancedCode: gosmtp.EnhancedCode{5, 7, 11},
		Message: "Encryption required: issue STARTTLS before AUTH"}
	errBadCredentials = &gosmtp.SMTPError{Code: 535, EnhancedCode: gosmtp.EnhancedCode{5, 7, 8},
		Message: "Authentication credentials invalid"}
	errMalformedAuth = &gosmtp.SMTPError{Code: 501, EnhancedCode: gosmtp.EnhancedCode{5, 5, 2},
		Message: "Malformed AUTH response"}
	errAuthUnavailable = &gosmtp.SMTPError{Code: 454, EnhancedCode: gosmtp.EnhancedCode{4, 7, 0},
		Message: "Temporary authentication failure, try again later"}
	errTooManyRecipients = &gosmtp.SMTPError{Code: 452, EnhancedCode: gosmtp.EnhancedCode{4, 5, 3},
		Message: "Too many recipients"}
	errAuthTooLate = &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 7, 0},
		Message: "Authentication came after the deadline to authenticate, closing"}
	// RFC 5321 4.1.4: MAIL inside a transaction is out of sequence; taking
	// it would silently drop the recipients already given.
	errNestedMail = &gosmtp.SMTPError{Code: 503, EnhancedCode: gosmtp.EnhancedCode{5, 5, 1},
		Message: "Nested MAIL command: a transaction is already open, send RSET to start over"}
	errShuttingDown = &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 3, 2},
		Message: "Shutting down, try again later"}
	errDataTimeout = &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 4, 2},
		Message: "Timeout while receiving the message"}
	errDataIncomplete = &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 4, 0},
		Message: "Message not received completely"}
	errStoreFailed = &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0},
		Message: "Message not stored because of a local error, try again later"}
	// RFC 3463's "mail system full", which senders know to retry.
	errDiskFull = &gosmtp.SMTPError{Code: 452, EnhancedCode: gosmtp.EnhancedCode{4, 3, 1},
		Message: "Message not stored: the disk is full, try again later"}
	errBusy = &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0},
		Message: "Message not stored: the server is busy or shutting down, try again later"}
)

func errTooBig(limit int64, plan string) error {
	return &gosmtp.SMTPError{Code: 552, EnhancedCode: gosmtp.EnhancedCode{5, 3, 4},
		Message: fmt.Sprintf("message exceeds the %d-byte limit of the %s plan", limit, plan)}
}

func errLineTooLong(limit int) error {
	return &gosmtp.SMTPError{Code: 500, EnhancedCode: gosmtp.EnhancedCode{5, 5, 2},
		Message: fmt.Sprintf("message has a line longer than %d bytes", limit)}
}

// queued is the reply to DATA once the message is committed. go-smtp sends
// an SMTPError returned by Data as the reply whatever its code, and it is
// the only way to name the message id in the 250.
func queued(id string) error {
	return &gosmtp.SMTPError{Code: 250, EnhancedCode: gosmtp.EnhancedCode{2, 0, 0},
		Message: "OK: queued as " + id}
}

type backend struct{ srv *Server }

// NewSession runs at EHLO/HELO, and again after STARTTLS: go-smtp drops the
// plaintext session then, so a session's TLS state never changes.
func (b backend) NewSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	nc := c.Conn()
	tc, isTLS := nc.(*tls.Conn)
	if isTLS {
		nc = tc.NetConn()
	}
	cn, _ := nc.(*conn)
	if isTLS && cn != nil {
		cn.setTLS(tc)
	}
	return &session{srv: b.srv, conn: cn, tls: isTLS, remote: nc.RemoteAddr()}, nil
}

type session struct {
	srv    *Server
	conn   *conn // nil only if go-smtp was handed a connection not from listener
	tls    bool
	remote net.Addr

	// Set by a successful AUTH.
	inbox string
	limit int64
	plan  string
	// declared is the size MAIL FROM announced (SIZE=), 0 when none.
	declared int64

	// mu guards the envelope: with BDAT, go-smtp runs Data on a goroutine of
	// its own, concurrently with an RSET that resets the transaction.
	mu   sync.Mutex
	from string
	to   []string
	// inMail is set by MAIL and cleared when the transaction ends.
	inMail bool
}

var (
	_ gosmtp.Session     = (*session)(nil)
	_ gosmtp.AuthSession = (*session)(nil)
)

// AuthMechanisms is what EHLO advertises: nothing before TLS unless the
// operator allows it.
func (s *session) AuthMechanisms() []string {
	if !s.authAllowed() {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

func (s *session) authAllowed() bool { return s.tls || s.srv.cfg.AllowInsecureAuth }

func (s *session) Auth(mech string) (sasl.Server, error) {
	if !s.authAllowed() {
		return nil, errEncryptionRequired
	}
	switch mech {
	case sasl.Plain:
		return saslReplies{sasl.NewPlainServer(s.authenticate)}, nil
	case sasl.Login:
		return &loginServer{authenticate: s.authenticate}, nil
	}
	return nil, gosmtp.ErrAuthUnknownMechanism
}

// authenticate reads the inbox at every AUTH, so a rotated password takes
// effect for the next session at once.
func (s *session) authenticate(identity, username, password string) (err error) {
	defer func() { s.srv.countRefusal(err) }()
	if identity != "" && identity != username {
		return errBadCredentials
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, authTimeout)
	defer cancel()
	// The user name is logged only once it names an inbox: a client that
	// swapped its fields sends the password as the user name.
	in, err := s.srv.st.Inbox(ctx, "", username)
	if errors.Is(err, store.ErrNotFound) {
		s.srv.log.Debug("smtp auth failed", "remote", s.remote.String(), "reason", "the user name is not an inbox id")
		return errBadCredentials
	}
	if err != nil {
		s.srv.outage.Failed(err, "smtp: database", "at", "read inbox", "remote", s.remote.String())
		return authUnavailable(err)
	}
	if subtle.ConstantTimeCompare([]byte(password), []byte(in.SMTPPassword)) != 1 {
		s.srv.log.Debug("smtp auth failed", "remote", s.remote.String(), "inbox", in.ID, "reason", "wrong password")
		return errBadCredentials
	}
	p, err := s.srv.st.Project(ctx, in.ProjectID)
	if err != nil {
		s.srv.outage.Failed(err, "smtp: database", "at", "read project", "project", in.ProjectID)
		return authUnavailable(err)
	}
	if !s.srv.authenticated(s.conn) {
		// The deadline passed while the credential was checked: the
		// connection is being closed with its 421.
		return errAuthTooLate
	}
	s.inbox, s.limit, s.plan = in.ID, p.Plan.MessageBytes, p.Plan.Name
	return nil
}

func (s *session) Mail(from string, opts *gosmtp.MailOptions) (err error) {
	defer func() { s.srv.countRefusal(err) }()
	if s.inbox == "" {
		return errAuthRequired
	}
	s.mu.Lock()
	nested := s.inMail
	s.mu.Unlock()
	if nested {
		return errNestedMail
	}
	if opts != nil && opts.Size > s.limit {
		return errTooBig(s.limit, s.plan)
	}
	if !s.srv.beginTx(s.conn) {
		return errShuttingDown
	}
	s.mu.Lock()
	s.from, s.to, s.inMail = from, nil, true
	s.declared = 0
	if opts != nil {
		s.declared = opts.Size
	}
	s.mu.Unlock()
	return nil
}

func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.to) >= maxRecipients {
		return errTooManyRecipients
	}
	s.to = append(s.to, to)
	return nil
}

// Data stores the message and answers only once it is committed.
func (s *session) Data(r io.Reader) (err error) {
	defer func() { s.srv.countRefusal(err) }()
	if s.inbox == "" {
		return errAuthRequired
	}
	start := time.Now()
	s.mu.Lock()
	from, to, declared := s.from, s.to, s.declared
	s.mu.Unlock()
	// The message is held from its first byte to its commit, and parsed
	// in between: it reserves its bytes in the ingest budget as it grows,
	// and parseWeight times them before it is parsed.
	admitCtx, cancel := admission.Within(s.srv.admitCtx, s.srv.cfg.AdmissionWait)
	defer cancel()
	res, err := s.srv.budget.Reserve(admitCtx, min(max(declared, initialReservation), s.limit+1))
	if err != nil {
		return s.refuse(err)
	}
	defer res.Release()
	buf := s.srv.buffers.Get().(*buffer)
	defer s.srv.putBuffer(buf)
	raw, err := readMessage(buf, r, s.limit, declared, func(size int) error { return res.Grow(admitCtx, int64(size)) })
	switch {
	case errors.Is(err, admission.ErrBusy) || errors.Is(err, context.Canceled):
		return s.refuse(err)
	// go-smtp's own cap is the largest plan's limit; it also refuses a
	// message of exactly that size, as it stops reading before the final
	// dot.
	case errors.Is(err, errOverLimit) || errors.Is(err, gosmtp.ErrDataTooLarge):
		return errTooBig(s.limit, s.plan)
	case errors.Is(err, gosmtp.ErrTooLongLine):
		return errLineTooLong(s.srv.cfg.MaxLineLength)
	case err != nil:
		// The client went away, stalled or reset a BDAT transfer: nothing
		// is stored, and the reply (if anyone still reads it) says the
		// message was not received rather than quoting a network error.
		s.srv.log.Debug("smtp message abandoned", "remote", s.remote.String(), "inbox", s.inbox, "err", err)
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			if s.conn != nil {
				s.conn.closeAfterReply.Store(true)
			}
			return errDataTimeout
		}
		return errDataIncomplete
	}

	if _, chunked := r.(*io.PipeReader); !chunked { // go-smtp hands BDAT's chunks over a pipe
		raw = unstuffAfterBareLF(raw)
	}
	if err := res.Grow(admitCtx, parseWeight*int64(len(raw))); err != nil {
		return s.refuse(err)
	}
	m := ingest.NewMessage(s.inbox, from, to, raw, mailparse.Parse(raw))
	// The store takes the context into account only while the message
	// waits for a place in its queue; once queued, the outcome of the
	// commit is always reported, so no stored message is ever answered
	// with an error. The server's context ends only when it is closed.
	id, err := s.srv.st.InsertMessage(s.srv.ctx, m)
	if err != nil {
		s.srv.outage.Failed(err, "smtp: database", "at", "store message", "inbox", s.inbox, "size", len(raw))
		if errors.Is(err, store.ErrDiskFull) {
			return errDiskFull
		}
		if why := store.Why(err); why != "" {
			return &gosmtp.SMTPError{Code: errStoreFailed.Code, EnhancedCode: errStoreFailed.EnhancedCode,
				Message: "Message not stored: " + smtpText(why) + ", try again later"}
		}
		return errStoreFailed
	}
	s.srv.outage.Taken()
	if s.srv.log.Enabled(context.Background(), slog.LevelDebug) {
		s.srv.log.Debug("smtp message captured", "id", id, "inbox", s.inbox, "size", len(raw),
			"recipients", len(to), "attachments", len(m.Attachments), "warnings", len(m.Warnings),
			"took", time.Since(start))
	}
	return queued(id)
}

const (
	// initialReservation is what a message reserves before its first byte,
	// unless MAIL FROM declared its size: most mail fits.
	initialReservation = 64 << 10
	// parseWeight is how many times its size a message holds while it is
	// parsed and stored: the raw bytes, the decoded bodies and
	// attachments, and what parsing allocates on the way.
	parseWeight = 4
)

// refuse answers a message that was not admitted: 451 4.3.0, try later.
func (s *session) refuse(err error) error {
	s.srv.log.Warn("smtp: message refused", "remote", s.remote.String(), "inbox", s.inbox, "err", err)
	return errBusy
}

var errOverLimit = errors.New("message over the size limit")

// countRefusal tells Config.Refused of an answer that refused a sign-in
// or a message, by the code the read API would give it.
func (srv *Server) countRefusal(err error) {
	var se *gosmtp.SMTPError
	if srv.cfg.Refused == nil || !errors.As(err, &se) {
		return
	}
	switch se.Code {
	case 535:
		srv.cfg.Refused("unauthorized")
	case 552:
		srv.cfg.Refused("quota_exceeded")
	case 421, 451, 452, 454:
		srv.cfg.Refused("unavailable")
	}
}

func messageOutage(log *slog.Logger) *outage.Log {
	return outage.New(log, "smtp: messages refused", "smtp: messages taken again", "refused")
}

// declaredSlack is what a buffer sized by SIZE= holds beyond it.
const declaredSlack = 4 << 10

// buffer holds one message while it is parsed and stored.
type buffer struct{ b []byte }

// unstuffAfterBareLF undoes the dot-stuffing of lines that end in a bare
// LF. RFC 5321 has only CRLF end a line, and go-smtp removes the doubled
// dot only after one; but a client that sends bare LFs (Python's
// smtplib.sendmail given msg.as_bytes(), with its "\n" line ends) doubles
// the dot of every line that begins with one, after LF alone too. The
// stuffed dot is removed there as well, when the dot it doubled follows,
// so that the message is stored as the client meant it, byte for byte.
// (A client that sends bare LFs but stuffs only after CRLF, and writes a
// line that begins with two dots, loses one; no common client does.)
func unstuffAfterBareLF(b []byte) []byte {
	if !bytes.Contains(b, []byte("\n..")) {
		return b // nearly every message: nothing to look at byte by byte
	}
	w := 0
	var prev, prev2 byte // the two source bytes before b[i]
	for i, c := range b {
		stuffed := c == '.' && prev == '\n' && prev2 != '\r' && i > 0 && i+1 < len(b) && b[i+1] == '.'
		prev2, prev = prev, c
		if stuffed {
			// The next dot is the line's own; it begins the line as far
			// as the rule goes, which it cannot meet again.
			prev = 0
			continue
		}
		b[w] = c
		w++
	}
	return b[:w]
}

// readMessage reads a whole message into buf. It never holds more than
// limit+1 bytes: its growth is capped there rather than doubling past it.
// A message whose size MAIL FROM declared (declared > 0) gets a buffer of
// that size at once: doubling up to a 46 MiB message held a 64 MiB buffer
// and, while copying into it, the 32 MiB one before. grow, when set, is
// asked first for each larger size the message needs (old and new buffer
// together), and its error stops the read.
func readMessage(buf *buffer, r io.Reader, limit, declared int64, grow func(size int) error) ([]byte, error) {
	most := int(min(limit+1, math.MaxInt32))
	// The declared size plus room for the read that finds the end: a
	// buffer that is exactly full would grow again just to see EOF.
	expected := int(min(declared, math.MaxInt32-declaredSlack)) + declaredSlack
	b := buf.b[:0]
	for {
		if len(b) == cap(b) {
			if len(b) >= most {
				return nil, errOverLimit
			}
			size := min(most, max(2*cap(b), 4<<10))
			if declared > 0 && len(b) < expected {
				size = min(most, max(size, expected))
			}
			if grow != nil {
				if err := grow(cap(b) + size); err != nil {
					return nil, err
				}
			}
			grown := make([]byte, len(b), size)
			copy(grown, b)
			b = grown
			buf.b = b
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF && len(b) > int(limit):
			return nil, errOverLimit
		case err == io.EOF:
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}

// Reset ends a transaction (RSET, a new EHLO, or the reply to DATA having
// been written).
func (s *session) Reset() {
	s.mu.Lock()
	s.from, s.to, s.inMail = "", nil, false
	s.mu.Unlock()
	s.srv.endTx(s.conn)
}

func (s *session) Logout() error {
	s.srv.endTx(s.conn)
	return nil
}

// saslReplies turns a SASL mechanism's own errors (a response it cannot
// split, a second response) into a 501; go-smtp would send them as a 454,
// which tells the client to retry the same bad input later.
type saslReplies struct{ sasl.Server }

func (r saslReplies) Next(response []byte) ([]byte, bool, error) {
	challenge, done, err := r.Server.Next(response)
	if _, ok := err.(*gosmtp.SMTPError); err != nil && !ok {
		err = errMalformedAuth
	}
	return challenge, done, err
}

// loginServer is the server side of the LOGIN mechanism
// (draft-murchison-sasl-login), which go-sasl implements for clients only.
// It asks for the user name unless the client sent it with AUTH.
type loginServer struct {
	authenticate sasl.PlainAuthenticator
	step         int
	username     string
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if response == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough
	case 1:
		l.step = 2
		l.username = string(response)
		return []byte("Password:"), false, nil
	case 2:
		l.step++
		return nil, true, l.authenticate("", l.username, string(response))
	}
	return nil, false, errMalformedAuth
}

// smtpText keeps a reply's words to printable ASCII on one line, as RFC
// 5321 replies must be.
func smtpText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s)
}

// authUnavailable is the 454 of a credential the database could not check,
// with the database's reason when there is one to tell.
func authUnavailable(err error) error {
	why := store.Why(err)
	if why == "" {
		return errAuthUnavailable
	}
	return &gosmtp.SMTPError{Code: errAuthUnavailable.Code, EnhancedCode: errAuthUnavailable.EnhancedCode,
		Message: "Temporary authentication failure: " + smtpText(why) + ", try again later"}
}
