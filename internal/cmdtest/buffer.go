package cmdtest

import (
	"bytes"
	"sync"
)

// Buffer collects what a process or a logger writes while a test reads
// it: a bytes.Buffer whose writes (from os/exec's copying goroutine, or a
// logger on several goroutines) and reads may come at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
