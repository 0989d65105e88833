package server

import "encoding/json"

// scanner walks a body that json.Valid has already accepted, so it only
// has to find where tokens start and end, not judge them: the validation
// is encoding/json's own (nesting limit included), and the walk allocates
// nothing but the names it returns. It is what lets a typical POST /queue
// decode in a few allocations instead of the ~180 a json.Decoder token
// walk costs.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space.
func (s *scanner) peek() byte {
	s.skipSpace()
	return s.b[s.i]
}

// str returns the string token at s.i, quotes included, and whether it
// holds an escape.
func (s *scanner) str() (raw []byte, escaped bool) {
	start := s.i
	s.i++ // the opening quote
	for {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2 // the escaped byte can be a quote; \uXXXX's digits are plain
		case '"':
			s.i++
			return s.b[start:s.i], escaped
		default:
			s.i++
		}
	}
}

// key reads an object key and the colon after it, and returns the key
// unescaped ("c\u006dd" is cmd). An unescaped key is returned as a
// sub-slice of the body.
func (s *scanner) key() []byte {
	s.skipSpace()
	raw, escaped := s.str()
	s.skipSpace()
	s.i++ // ':'
	if !escaped {
		return raw[1 : len(raw)-1]
	}
	var k string
	_ = json.Unmarshal(raw, &k) // valid JSON string: cannot fail
	return []byte(k)
}

// value skips one value and returns it without surrounding space.
func (s *scanner) value() []byte {
	s.skipSpace()
	start := s.i
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ' ', '\t', '\n', '\r', ',', '}', ']':
				return s.b[start:s.i]
			}
			s.i++
		}
	}
	return s.b[start:s.i]
}

// more reports whether the object or array whose members are being read
// has another one, consuming the comma or the closing delimiter.
func (s *scanner) more(first bool) bool {
	switch s.peek() {
	case '}', ']':
		s.i++
		return false
	case ',':
		s.i++
		return true
	}
	return first // the first member follows the opening delimiter directly
}

// scanRepeatedKey returns the first key that appears twice in one object
// anywhere inside raw, a valid JSON value, in the order a reader meets
// them: a key is checked before its value is entered.
func scanRepeatedKey(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' {
		return "", false
	}
	s := &scanner{b: raw}
	return s.repeated()
}

func (s *scanner) repeated() (string, bool) {
	switch s.peek() {
	case '{':
		s.i++
		var seen map[string]struct{}
		for first := true; s.more(first); first = false {
			k := s.key()
			if _, dup := seen[string(k)]; dup {
				return string(k), true
			}
			if seen == nil {
				seen = make(map[string]struct{})
			}
			seen[string(k)] = struct{}{}
			if key, twice := s.repeated(); twice {
				return key, true
			}
		}
	case '[':
		s.i++
		for first := true; s.more(first); first = false {
			if key, twice := s.repeated(); twice {
				return key, true
			}
		}
	default:
		s.value()
	}
	return "", false
}

// stringValue reads a raw value that is a JSON string. One without escapes
// is its bytes between the quotes (the body is valid UTF-8 and valid
// JSON, so they hold no control characters); others go through
// encoding/json.
func stringValue(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && !containsByte(raw, '\\') {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// stringMap reads a raw JSON object whose values are all strings; ok is
// false for anything else, which the caller then words an error for.
func stringMap(raw []byte) (m map[string]string, ok bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	s := &scanner{b: raw, i: 1}
	m = make(map[string]string)
	for first := true; s.more(first); first = false {
		k := string(s.key())
		v := s.value()
		if v[0] == 'n' { // null, which encoding/json reads as ""
			m[k] = ""
			continue
		}
		if v[0] != '"' {
			return nil, false
		}
		str, err := stringValue(v)
		if err != nil {
			return nil, false
		}
		m[k] = str
	}
	return m, true
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
