package devacl

import (
	"bytes"
	"errors"
	"testing"
)

// The kernel's format: a little-endian version 2 header, then 8-byte
// entries (tag, perm, id) sorted by tag then id.
func TestACL_BytesMatchesKernelFormat(t *testing.T) {
	a := ACL{
		{Tag: TagOther},
		{Tag: TagUser, Perm: PermRead | PermWrite, ID: 1001},
		{Tag: TagUserObj, Perm: PermRead | PermWrite},
		{Tag: TagMask, Perm: PermRead | PermWrite},
		{Tag: TagGroupObj},
	}
	want := []byte{
		2, 0, 0, 0,
		0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x02, 0, 6, 0, 0xe9, 0x03, 0, 0,
		0x04, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
	}
	got, err := a.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes\n got %v\nwant %v", got, want)
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 5 || back[1] != (Entry{Tag: TagUser, Perm: 6, ID: 1001}) {
		t.Fatalf("parsed back %v", back)
	}
}

func TestParse_RejectsMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version 1":   {1, 0, 0, 0},
		"short entry": {2, 0, 0, 0, 1, 0, 6},
		"bad tag":     {2, 0, 0, 0, 0x40, 0, 6, 0, 0, 0, 0, 0},
		"bad perm":    {2, 0, 0, 0, 0x01, 0, 8, 0, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := Parse(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func TestACL_BytesRefusesNamedEntryWithoutMask(t *testing.T) {
	a := ACL{{Tag: TagUserObj, Perm: 6}, {Tag: TagUser, Perm: 6, ID: 5}, {Tag: TagGroupObj}, {Tag: TagOther}}
	if _, err := a.Bytes(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v, want ErrMalformed", err)
	}
}

func TestFromMode(t *testing.T) {
	a := FromMode(0o640)
	want := ACL{{Tag: TagUserObj, Perm: 6, ID: noID}, {Tag: TagGroupObj, Perm: 4, ID: noID}, {Tag: TagOther, Perm: 0, ID: noID}}
	if len(a) != 3 || a[0] != want[0] || a[1] != want[1] || a[2] != want[2] {
		t.Fatalf("got %v", a)
	}
}
