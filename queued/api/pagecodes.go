package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// CodeLifetime is how long a one-time code for the status page is good:
// long enough for a browser to start, short enough that a code someone
// saw is dead soon after.
const CodeLifetime = 60 * time.Second

// MaxOutstandingCodes bounds the codes issued and not yet used or
// expired: a client that asks in a loop gets a refusal, not memory.
const MaxOutstandingCodes = 8

// maxPageTokens bounds the page tokens kept; the oldest goes first, and
// its page must be opened again.
const maxPageTokens = 64

// ErrTooManyCodes refuses a code while MaxOutstandingCodes are
// outstanding (answered 429).
var ErrTooManyCodes = errors.New("too many one-time codes outstanding")

// ErrBadCode refuses an exchange whose code was never issued, was used
// already or has expired (answered 401).
var ErrBadCode = errors.New("the one-time code is unknown, used or expired")

// PageCodeResponse answers POST /page/code.
type PageCodeResponse struct {
	// Code is good for one exchange at POST /page/session, within
	// ExpiresIn seconds.
	Code      string `json:"code"`
	ExpiresIn int    `json:"expires_in"`
}

// PageSessionRequest is POST /page/session's body.
type PageSessionRequest struct {
	Code string `json:"code"`
}

// PageSessionResponse answers POST /page/session: the token the page
// sends as its bearer token. It reads only the page's data.
type PageSessionResponse struct {
	Token string `json:"token"`
}

// PageCodes are the one-time codes that open the status page and the
// page tokens they were exchanged for, kept in memory (a restart ends
// them). Both are kept by their SHA-256, so a lookup's timing tells
// nothing of a stored secret. The daemon and web's page proxy each keep
// one; it is safe for concurrent use.
type PageCodes struct {
	mu     sync.Mutex
	codes  map[string]time.Time // code hash -> expiry
	tokens map[string]time.Time // page token hash -> made
	// Token, when set, is the one page token every exchange answers
	// (the proxy's own); else each exchange makes a new one.
	Token string
	now   func() time.Time
}

// NewPageCodes is an empty store; token, when not "", is the page token
// every exchange answers.
func NewPageCodes(token string) *PageCodes {
	return &PageCodes{codes: map[string]time.Time{}, tokens: map[string]time.Time{}, Token: token, now: time.Now}
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func randomHex() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a one-time code: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// prune drops expired codes; the lock is held.
func (pc *PageCodes) prune(now time.Time) {
	for h, exp := range pc.codes {
		if !now.Before(exp) {
			delete(pc.codes, h)
		}
	}
}

// Issue makes a new code, good once within CodeLifetime, or refuses with
// ErrTooManyCodes while MaxOutstandingCodes are outstanding.
func (pc *PageCodes) Issue() (string, error) {
	code, err := randomHex()
	if err != nil {
		return "", err
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	now := pc.now()
	pc.prune(now)
	if len(pc.codes) >= MaxOutstandingCodes {
		return "", fmt.Errorf("%w: %d, each good for %s; wait for one to be used or to expire", ErrTooManyCodes, len(pc.codes), CodeLifetime)
	}
	pc.codes[hashOf(code)] = now.Add(CodeLifetime)
	return code, nil
}

// Exchange uses code up and returns the page token for it, or
// ErrBadCode.
func (pc *PageCodes) Exchange(code string) (string, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	now := pc.now()
	h := hashOf(code)
	exp, ok := pc.codes[h]
	delete(pc.codes, h)
	if !ok || !now.Before(exp) {
		return "", ErrBadCode
	}
	if pc.Token != "" {
		return pc.Token, nil
	}
	tok, err := randomHex()
	if err != nil {
		return "", err
	}
	if len(pc.tokens) >= maxPageTokens {
		oldest, first := "", time.Time{}
		for th, made := range pc.tokens {
			if oldest == "" || made.Before(first) {
				oldest, first = th, made
			}
		}
		delete(pc.tokens, oldest)
	}
	pc.tokens[hashOf(tok)] = now
	return tok, nil
}

// PageToken reports whether tok is a page token an exchange made.
func (pc *PageCodes) PageToken(tok string) bool {
	if tok == "" {
		return false
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, ok := pc.tokens[hashOf(tok)]
	return ok
}

// maxCodeBody bounds POST /page/session's body: a code is 64 characters.
const maxCodeBody = 1 << 10

// ReadCode reads POST /page/session's body, {"code": "..."}, at most 1
// KiB: the daemon and web's page proxy both take it so.
func ReadCode(body io.Reader) (string, error) {
	var req PageSessionRequest
	b, err := io.ReadAll(io.LimitReader(body, maxCodeBody+1))
	if err == nil && len(b) > maxCodeBody {
		err = fmt.Errorf("%d bytes or more, the limit is %d", len(b), maxCodeBody)
	}
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err == nil && strings.TrimSpace(req.Code) == "" {
		err = errors.New("no code")
	}
	if err != nil {
		return "", fmt.Errorf(`want a JSON body {"code": "..."} with the code from the page's address: %w`, err)
	}
	return strings.TrimSpace(req.Code), nil
}
