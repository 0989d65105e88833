package account_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/account"
)

func TestLookup_ReadsTheUserDatabase(t *testing.T) {
	_, extra := usertest.Group(t, "ttqg")
	gname, _ := usertest.Group(t, "ttqh")
	u := usertest.New(t, "ttqa", gname)
	a, err := account.LookupUID(u.UID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != u.Name || a.GID != u.GID || a.Home != u.Home || a.Shell != "/bin/bash" {
		t.Errorf("account = %+v, want name %s gid %d home %s shell /bin/bash", a, u.Name, u.GID, u.Home)
	}
	gid, err := account.GroupID(gname)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Member(gid) || !a.Member(u.GID) || a.Member(extra) {
		t.Errorf("groups %v: want %d and %d, not %d", a.Groups, u.GID, gid, extra)
	}
	byName, err := account.LookupName(u.Name)
	if err != nil || byName.UID != u.UID {
		t.Errorf("LookupName(%s) = %+v, %v", u.Name, byName, err)
	}
	env := a.Env()
	want := []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name, "SHELL=/bin/bash"}
	if !slices.Equal(env, want) {
		t.Errorf("Env = %q, want %q", env, want)
	}
}

func TestLookup_UnknownNamesTheValue(t *testing.T) {
	if _, err := account.LookupName("no-such-user-ttq"); !errors.Is(err, account.ErrUnknownUser) {
		t.Errorf("LookupName: %v, want ErrUnknownUser", err)
	}
	if _, err := account.LookupUID(4000000123); !errors.Is(err, account.ErrUnknownUser) {
		t.Errorf("LookupUID: %v, want ErrUnknownUser", err)
	}
	_, err := account.GroupID("no-such-group-ttq")
	if !errors.Is(err, account.ErrUnknownGroup) {
		t.Fatalf("GroupID: %v, want ErrUnknownGroup", err)
	}
	if got := err.Error(); got != `group "no-such-group-ttq": no such group` {
		t.Errorf("message %q does not name the group", got)
	}
}
