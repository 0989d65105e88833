package procscan_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ttkit/ttkit/internal/procscan"
)

// A scanner pointed at a fake driver tree and a fake /proc, as in tests.
// In production the zero Options read /proc/driver/tenstorrent and /proc.
func Example() {
	root, err := os.MkdirTemp("", "procscan-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	for path, content := range map[string]string{
		"driver/0/pids":     "4242\n4242\n0\n",
		"driver/1/pids":     "4242\n",
		"proc/4242/stat":    "4242 (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n",
		"proc/4242/cmdline": "python3\x00train.py\x00--epochs\x003\x00",
	} {
		path = filepath.Join(root, path)
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		_ = os.WriteFile(path, []byte(content), 0o644)
	}

	s := procscan.New(procscan.Options{
		DriverPath: filepath.Join(root, "driver"),
		ProcPath:   filepath.Join(root, "proc"),
	})
	defer s.Close()
	res := s.Scan()
	for _, p := range res.Processes {
		fmt.Printf("pid %d on devices %v: %s (%q, from %s, started at %d)\n",
			p.PID, p.Devices, p.Identity.FriendlyName, p.Identity.CommandLine, p.Identity.Source, p.Identity.StartTime)
	}
	for _, d := range res.Devices {
		fmt.Printf("device %d: %d holder(s)\n", d.Number, d.Holders)
	}
	fmt.Println("tt_process_count:", res.ProcessCount(), "complete:", res.Complete)
	// Output:
	// pid 4242 on devices [0 1]: train.py ("python3 train.py --epochs 3", from cmdline, started at 777)
	// device 0: 2 holder(s)
	// device 1: 1 holder(s)
	// tt_process_count: 2 complete: true
}
