package friendlyname_test

import (
	"fmt"

	"github.com/ttkit/ttkit/internal/friendlyname"
)

func ExampleDerive() {
	for _, line := range []string{
		"taskset -c 0-3 timeout 600 python3 run.py",
		"/home/ci/.venv/bin/python3 /home/ci/.venv/bin/tt-smi -r 0",
		"python3 -m a.b.cli serve",
		"python3 -c import ttnn",
		"sudo -u ci python3 -m pytest -k add and not slow tests/ops/test_add.py::test_add[bf16]",
		"pytest -x tests/ops/",
		"/usr/local/bin/tt-metal-server --port 5555",
		"",
	} {
		fmt.Println(friendlyname.Derive(line))
	}
	// Output:
	// run.py
	// tt-smi
	// a.b.cli
	// python -c
	// test_add.py
	// ops
	// tt-metal-server
	// <unknown>
}
