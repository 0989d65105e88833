// Package udev holds the udev rule make install-system ENFORCE=1 installs
// (60-tenstorrent-queued.rules: card nodes 0600 root:root, for
// TT_DEVICE_ENFORCE=acl) and the test that reads it as udev would.
package udev
