package api

import (
	"errors"
	"testing"
	"time"
)

// A code is good once, within CodeLifetime; at most MaxOutstandingCodes
// wait at once; the page tokens kept are bounded, the oldest going first.
func TestPageCodes(t *testing.T) {
	now := time.Unix(1000, 0)
	pc := NewPageCodes("")
	pc.now = func() time.Time { return now }

	code, err := pc.Issue()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pc.Exchange(code)
	if err != nil || !pc.PageToken(tok) || tok == code {
		t.Fatalf("exchange: %q, %v", tok, err)
	}
	if _, err := pc.Exchange(code); !errors.Is(err, ErrBadCode) {
		t.Errorf("second exchange: %v, want ErrBadCode", err)
	}
	if pc.PageToken("") || pc.PageToken(code) {
		t.Error("an empty string or a used code passes as a page token")
	}

	late, _ := pc.Issue()
	now = now.Add(CodeLifetime)
	if _, err := pc.Exchange(late); !errors.Is(err, ErrBadCode) {
		t.Errorf("exchange at expiry: %v, want ErrBadCode", err)
	}

	for i := 0; i < MaxOutstandingCodes; i++ {
		if _, err := pc.Issue(); err != nil {
			t.Fatalf("code %d: %v", i+1, err)
		}
	}
	if _, err := pc.Issue(); !errors.Is(err, ErrTooManyCodes) {
		t.Errorf("code past the bound: %v, want ErrTooManyCodes", err)
	}
	now = now.Add(CodeLifetime)
	if _, err := pc.Issue(); err != nil {
		t.Errorf("a code once the others expired: %v", err)
	}

	pc = NewPageCodes("")
	pc.now = func() time.Time { return now }
	var first string
	for i := 0; i <= maxPageTokens; i++ {
		now = now.Add(time.Second)
		c, _ := pc.Issue()
		tok, err := pc.Exchange(c)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = tok
		}
	}
	if pc.PageToken(first) || len(pc.tokens) != maxPageTokens {
		t.Errorf("page tokens past the bound: %d kept, the oldest still good: %t", len(pc.tokens), pc.PageToken(first))
	}

	fixed := NewPageCodes("proxy-token")
	c, _ := fixed.Issue()
	if tok, err := fixed.Exchange(c); err != nil || tok != "proxy-token" {
		t.Errorf("a proxy's exchange: %q, %v", tok, err)
	}
}
