package config

import (
	"errors"
	"strings"
	"testing"
)

// TT_DEVICE_ENFORCE (issue 44): off unless acl is given, only in system
// mode; a bad value is refused naming it. Under enforcement a card waits
// for a foreign holder unless TT_DEVICE_WAIT_FOREIGN is given (0 says
// otherwise); TT_DEVICE_DEV_DIR names the nodes it fences.
func TestFromEnv_Enforce(t *testing.T) {
	sys := map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": "/run/q.sock"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range sys {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	c, err := FromEnv(env(sys))
	if err != nil || c.Enforce != "off" || c.Enforcing() || c.WaitsForForeign() {
		t.Fatalf("default: enforce %q, waits %v, %v", c.Enforce, c.WaitsForForeign(), err)
	}
	c, err = FromEnv(env(with("TT_DEVICE_ENFORCE", "acl", "TT_DEVICE_DEV_DIR", "/srv/dev")))
	if err != nil || !c.Enforcing() || !c.WaitsForForeign() || c.DevDir != "/srv/dev" {
		t.Fatalf("acl: %+v waits %v, %v", c, c.WaitsForForeign(), err)
	}
	c, err = FromEnv(env(with("TT_DEVICE_ENFORCE", "acl", "TT_DEVICE_WAIT_FOREIGN", "0")))
	if err != nil || c.WaitsForForeign() {
		t.Fatalf("acl with TT_DEVICE_WAIT_FOREIGN=0 still waits: %v", err)
	}
	var ee *EnvError
	_, err = FromEnv(env(with("TT_DEVICE_ENFORCE", "selinux")))
	if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_ENFORCE" || !strings.Contains(err.Error(), "selinux") {
		t.Errorf("TT_DEVICE_ENFORCE=selinux: %v", err)
	}
	_, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_ENFORCE": "acl"}))
	if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_ENFORCE" || !strings.Contains(err.Error(), "TT_DEVICE_SOCKET") {
		t.Errorf("TT_DEVICE_ENFORCE in user mode: %v, want it refused as system mode's", err)
	}
	_, err = FromEnv(env(with("TT_DEVICE_DEV_DIR", "dev")))
	if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_DEV_DIR" {
		t.Errorf("a relative TT_DEVICE_DEV_DIR: %v", err)
	}
}
