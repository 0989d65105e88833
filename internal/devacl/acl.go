// Package devacl gives one user at a time read-write on a card's device
// node, with a POSIX ACL entry, for queued's opt-in enforcement
// (TT_DEVICE_ENFORCE=acl, docs/system-mode.md): the node admits no one
// but root by default, and queued grants a job's user its cards while the
// job runs. The ACL is written as the kernel keeps it, in the
// system.posix_acl_access extended attribute, without libacl or setfacl.
package devacl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// Tag is the kind of an ACL entry, as the kernel numbers it.
type Tag uint16

// The entry kinds of an access ACL (linux/posix_acl.h).
const (
	TagUserObj  Tag = 0x01 // the file's owner
	TagUser     Tag = 0x02 // a named user (a grant)
	TagGroupObj Tag = 0x04 // the file's group
	TagGroup    Tag = 0x08 // a named group (the admin group's standing grant)
	TagMask     Tag = 0x10 // the most any named entry or the group gets
	TagOther    Tag = 0x20 // everyone else
)

// The permission bits of an entry.
const (
	PermRead  uint16 = 4
	PermWrite uint16 = 2
	PermExec  uint16 = 1
)

// noID is the id of the entries that name nobody (owner, group, mask,
// other), as the kernel writes it.
const noID = 0xffffffff

// xattrVersion is the version in the header of the kernel's format.
const xattrVersion = 2

// xattrName is the extended attribute that holds a file's access ACL.
const xattrName = "system.posix_acl_access"

// ErrMalformed is an ACL the kernel would refuse, or bytes that are not
// one.
var ErrMalformed = errors.New("malformed POSIX ACL")

// Entry is one line of an ACL: who (Tag, and ID for a named user or
// group) may do what (Perm).
type Entry struct {
	Tag  Tag
	Perm uint16
	ID   uint32
}

// ACL is an access ACL. Bytes sorts it as the kernel requires.
type ACL []Entry

// FromMode is the ACL a file without one has: its mode's three classes.
func FromMode(mode fs.FileMode) ACL {
	p := uint16(mode.Perm())
	return ACL{{TagUserObj, p >> 6 & 7, noID}, {TagGroupObj, p >> 3 & 7, noID}, {TagOther, p & 7, noID}}
}

// Parse reads the kernel's binary form: a little-endian version 2
// header, then 8-byte entries of tag, perm and id.
func Parse(b []byte) (ACL, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 {
		return nil, fmt.Errorf("%d bytes: %w", len(b), ErrMalformed)
	}
	if v := binary.LittleEndian.Uint32(b); v != xattrVersion {
		return nil, fmt.Errorf("version %d, want %d: %w", v, xattrVersion, ErrMalformed)
	}
	var a ACL
	for off := 4; off < len(b); off += 8 {
		e := Entry{Tag: Tag(binary.LittleEndian.Uint16(b[off:])), Perm: binary.LittleEndian.Uint16(b[off+2:]), ID: binary.LittleEndian.Uint32(b[off+4:])}
		if err := e.valid(); err != nil {
			return nil, err
		}
		a = append(a, e)
	}
	return a, nil
}

func (e Entry) valid() error {
	switch e.Tag {
	case TagUserObj, TagUser, TagGroupObj, TagGroup, TagMask, TagOther:
	default:
		return fmt.Errorf("entry tag %#x: %w", uint16(e.Tag), ErrMalformed)
	}
	if e.Perm&^7 != 0 {
		return fmt.Errorf("entry perm %#o: %w", e.Perm, ErrMalformed)
	}
	return nil
}

// Bytes is the kernel's binary form of a, sorted by tag then id. It
// refuses what the kernel would: a missing owner, group or other entry,
// two entries for one name, named entries without a mask.
func (a ACL) Bytes() ([]byte, error) {
	s := slices.Clone(a)
	for i := range s {
		if err := s[i].valid(); err != nil {
			return nil, err
		}
		if s[i].Tag != TagUser && s[i].Tag != TagGroup {
			s[i].ID = noID
		}
	}
	slices.SortFunc(s, func(x, y Entry) int {
		if x.Tag != y.Tag {
			return int(x.Tag) - int(y.Tag)
		}
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	count := map[Tag]int{}
	for i, e := range s {
		count[e.Tag]++
		if i > 0 && s[i-1].Tag == e.Tag && s[i-1].ID == e.ID {
			return nil, fmt.Errorf("two entries for tag %#x id %d: %w", uint16(e.Tag), e.ID, ErrMalformed)
		}
	}
	for _, t := range []Tag{TagUserObj, TagGroupObj, TagOther} {
		if count[t] != 1 {
			return nil, fmt.Errorf("%d entries of tag %#x, want 1: %w", count[t], uint16(t), ErrMalformed)
		}
	}
	if named := count[TagUser] + count[TagGroup]; named > 0 && count[TagMask] != 1 || count[TagMask] > 1 {
		return nil, fmt.Errorf("named entries need exactly one mask: %w", ErrMalformed)
	}
	b := make([]byte, 4, 4+8*len(s))
	binary.LittleEndian.PutUint32(b, xattrVersion)
	for _, e := range s {
		b = binary.LittleEndian.AppendUint16(b, uint16(e.Tag))
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, e.ID)
	}
	return b, nil
}

// named is a's entries of tag (TagUser or TagGroup), their ids.
func (a ACL) named(tag Tag) []uint32 {
	var ids []uint32
	for _, e := range a {
		if e.Tag == tag {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// perm is the permission of a's entry of tag (one that names nobody).
func (a ACL) perm(tag Tag) uint16 {
	for _, e := range a {
		if e.Tag == tag {
			return e.Perm
		}
	}
	return 0
}

// with is a with its named entries exactly users and groups (each
// read-write), a read-write mask when there are any, and none when not:
// then the group class is the owning group's again.
func (a ACL) with(users, groups []uint32) ACL {
	out := ACL{}
	for _, e := range a {
		if e.Tag == TagUserObj || e.Tag == TagGroupObj || e.Tag == TagOther {
			out = append(out, e)
		}
	}
	for _, id := range users {
		out = append(out, Entry{TagUser, PermRead | PermWrite, id})
	}
	for _, id := range groups {
		out = append(out, Entry{TagGroup, PermRead | PermWrite, id})
	}
	if len(users)+len(groups) > 0 {
		out = append(out, Entry{TagMask, PermRead | PermWrite | out.perm(TagGroupObj), noID})
	}
	return out
}
