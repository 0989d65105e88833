package account

import (
	"os/user"
	"strings"
	"testing"
)

// A user database that gives an id of all ones (-1 to the kernel, which
// leaves such an id unchanged) must not make an account queued switches
// to: the helper would keep root's gid or uid for it.
func TestFromUser_RefusesAnIDOfAllOnes(t *testing.T) {
	for _, u := range []user.User{
		{Uid: "4294967295", Gid: "1000", Username: "minus1"},
		{Uid: "1000", Gid: "4294967295", Username: "minus1"},
	} {
		_, err := fromUser(&u)
		if err == nil || !strings.Contains(err.Error(), "minus1") || !strings.Contains(err.Error(), "4294967295 is not an id") {
			t.Errorf("uid %s, gid %s: %v, want a refusal naming the user and the id", u.Uid, u.Gid, err)
		}
	}
}
