package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// TokenFile is the name of the token file in the state directory.
const TokenFile = "token"

// AddressFile holds the daemon's base URL (such as
// http://127.0.0.1:5741), written at start so clients and tests can find a
// daemon listening on a chosen or random port.
const AddressFile = "address"

const tokenHexLen = 64

// EnsureToken returns the daemon's bearer token, kept in
// <stateDir>/token. An existing token is reused when the file is a regular
// file of ours with mode 0600 and a well-formed token, so clients keep
// working across restarts; otherwise a new one is written atomically with
// mode 0600.
func EnsureToken(stateDir string) (string, error) {
	path := filepath.Join(stateDir, TokenFile)
	if tok, err := readToken(path); err == nil {
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o600 && ownedByUs(fi) {
			return tok, nil
		}
	}
	var b [tokenHexLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	tok := hex.EncodeToString(b[:])
	tmp, err := os.CreateTemp(stateDir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing token: %w", err)
	}
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	return tok, nil
}

func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// ErrNoToken means the token file does not exist: the daemon has never run
// with this state directory.
var ErrNoToken = errors.New("no token file")

// ReadToken reads the daemon's token from <stateDir>/token, for clients.
func ReadToken(stateDir string) (string, error) {
	return readToken(filepath.Join(stateDir, TokenFile))
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading %s: %w (is queued running with this state directory?)", path, ErrNoToken)
	}
	if err != nil {
		return "", fmt.Errorf("reading token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) != tokenHexLen {
		return "", fmt.Errorf("reading %s: malformed token", path)
	}
	return tok, nil
}

// WriteAddress records the daemon's base URL in <stateDir>/address.
func WriteAddress(stateDir, url string) error {
	path := filepath.Join(stateDir, AddressFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing address: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing address: %w", err)
	}
	return nil
}

// ReadAddress returns the base URL the daemon recorded, for clients that
// were not told one.
func ReadAddress(stateDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, AddressFile))
	if err != nil {
		return "", fmt.Errorf("reading daemon address: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
