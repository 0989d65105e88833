// Package ttprocessreceiver reports which host processes hold an open handle
// to a Tenstorrent kernel-mode driver device.
//
// Every collection cycle it reads the driver's per-device pids files, names
// each holder from its command line, and emits one tt_process gauge per
// process plus a tt_process_count gauge, so a shared host can answer "who is
// on the cards right now?" from Prometheus.
//
//go:generate go tool mdatagen metadata.yaml
package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"
